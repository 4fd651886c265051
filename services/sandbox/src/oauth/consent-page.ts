import { hiddenFieldsOf, type AuthorizationRequest } from './authorization-request.ts';

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for HTML content and quoted attribute values, with the five usual entities. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] as string);
}

function pageOf(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;line-height:1.5}label{display:block;margin-top:.75rem}input{width:100%;padding:.4rem;box-sizing:border-box}.actions{margin-top:1rem;display:flex;gap:.5rem}.problem{color:#a40000}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}

/** What the consent page shows: the request, where it posts, and (after a bad POST) what was wrong and what was typed. */
export interface ConsentPage {
  /** `<Label> (sandbox)`. */
  serviceName: string;
  request: AuthorizationRequest;
  /** The path the form posts to: `/<connector>/oauth/authorize`. */
  formAction: string;
  problem?: string;
  login?: string;
  name?: string;
}

/**
 * The sandbox's sign-in and consent page: a plain form (no script) that posts the request's
 * parameters back in hidden inputs, with the member's login (any value; there is no
 * password), an optional display name, and Authorize / Cancel buttons named `decision`.
 */
export function renderConsentPage(page: ConsentPage): string {
  const { request } = page;
  const title = `Sign in to ${page.serviceName}`;
  const clientName = request.client.name ?? 'An application';
  const hidden = hiddenFieldsOf(request)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('\n');
  const loginValue = page.login !== undefined ? ` value="${escapeHtml(page.login)}"` : '';
  const nameValue = page.name !== undefined ? ` value="${escapeHtml(page.name)}"` : '';
  const problem = page.problem !== undefined ? `<p class="problem" role="alert">${escapeHtml(page.problem)}</p>\n` : '';
  return pageOf(
    title,
    `<h1>${escapeHtml(title)}</h1>
<p><strong>${escapeHtml(clientName)}</strong> asks to use your ${escapeHtml(page.serviceName)} account. After you authorize it, you are sent back to <code>${escapeHtml(new URL(request.redirectUri).origin)}</code>.</p>
<p>This is a stand-in service for development and tests: any login is accepted and there is no password.</p>
${problem}<form method="post" action="${escapeHtml(page.formAction)}">
${hidden}
<label for="login">Login</label><input id="login" name="login" required${loginValue}>
<label for="name">Name (optional)</label><input id="name" name="name"${nameValue}>
<div class="actions">
<button type="submit" name="decision" value="approve">Authorize</button>
<button type="submit" name="decision" value="deny" formnovalidate>Cancel</button>
</div>
</form>`,
  );
}

/** The page shown instead of a redirect when the client or its redirect URI cannot be trusted. */
export function renderRefusalPage(serviceName: string, message: string): string {
  return pageOf(`Authorization request refused — ${serviceName}`, `<h1>This authorization request cannot be completed</h1>\n<p>${escapeHtml(message)}</p>\n<p>You were not sent back to the application, because its address could not be verified.</p>`);
}
