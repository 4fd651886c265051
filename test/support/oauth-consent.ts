import type { ApiClient } from './api-client.ts';

const ENTITIES: Record<string, string> = { '&amp;': '&', '&quot;': '"', '&#39;': "'", '&#x27;': "'", '&lt;': '<', '&gt;': '>' };
const decode = (text: string) => text.replace(/&(amp|quot|#39|#x27|lt|gt);/g, (m) => ENTITIES[m] ?? m);

function attribute(tag: string, name: string): string | undefined {
  const match = new RegExp(`\\s${name}\\s*=\\s*("([^"]*)"|'([^']*)')`, 'i').exec(tag);
  return match ? decode(match[2] ?? match[3] ?? '') : undefined;
}

/**
 * What a person does on a sandbox provider's consent page, without a browser: loads the
 * page `authorizeUrl` leads to, fills in the form it shows (its hidden fields, the login and
 * name typed in, the button pressed) and submits it the way a browser would. Returns where
 * the provider redirects next (the gateway's callback, with a code or an error).
 */
export async function submitConsent(authorizeUrl: string, person: { login: string; name?: string }, decision: 'approve' | 'deny' = 'approve'): Promise<string> {
  const page = await fetch(authorizeUrl, { redirect: 'manual' });
  const html = await page.text();
  if (page.status !== 200) throw new Error(`the consent page answered ${page.status}: ${html.slice(0, 300)}`);
  const form = /<form\b[^>]*>/i.exec(html)?.[0];
  if (!form) throw new Error('the consent page has no form');
  const action = new URL(attribute(form, 'action') ?? authorizeUrl, authorizeUrl);
  const fields = new URLSearchParams();
  for (const input of html.match(/<input\b[^>]*>/gi) ?? []) {
    const name = attribute(input, 'name');
    if (name && (attribute(input, 'type') ?? 'text').toLowerCase() === 'hidden') fields.set(name, attribute(input, 'value') ?? '');
  }
  fields.set('login', person.login);
  if (person.name !== undefined) fields.set('name', person.name);
  fields.set('decision', decision);
  const submitted = await fetch(action, {
    method: (attribute(form, 'method') ?? 'post').toUpperCase(),
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: fields.toString(),
  });
  await submitted.body?.cancel();
  const location = submitted.headers.get('location');
  if (submitted.status !== 302 || !location) throw new Error(`the consent form answered ${submitted.status} without a redirect`);
  return new URL(location, action).toString();
}

/** Calls a running sandbox's test controls (`/_sandbox/<path>`), e.g. `github/apps`. */
export async function sandboxControl(sandboxUrl: string, path: string, body: unknown): Promise<any> {
  const res = await fetch(`${sandboxUrl}/_sandbox/${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`sandbox ${path} answered ${res.status}: ${await res.text()}`);
  return res.json();
}

/**
 * A member connects `service` the way a browser would: connect → provider consent (as
 * `login`) → the gateway's callback → the dashboard. Returns the dashboard address it lands on.
 */
export async function connectThroughConsent(member: ApiClient, agentId: string, service: string, login: string): Promise<string> {
  const started = await member.call('POST', `/api/agents/${agentId}/connect/${service}`);
  if (started.status !== 200) throw new Error(`connect ${service} answered ${started.status}: ${started.text}`);
  const callback = await submitConsent(started.body.authorizeUrl, { login, name: `${login} (${service})` });
  const finished = await member.call('GET', callback);
  if (finished.status !== 302) throw new Error(`the callback answered ${finished.status}: ${finished.text}`);
  return finished.headers.get('location')!;
}
