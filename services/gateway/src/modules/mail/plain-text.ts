/**
 * Text that someone other than the recipient wrote (an agent's name), made safe to quote in a
 * plain-text e-mail: one line, bounded, and with nothing a mail client would turn into a link —
 * `://` becomes `[:]//` and a dot that joins a host name becomes `[.]` ("defanging"), so
 * `https://evil.example/login` reads as `https[:]//evil[.]example/login`. Double quotes become
 * single ones, so the text cannot close the quotes it is shown in.
 */
export function quotedForMail(text: string, maxLength = 100): string {
  let line = text.replace(/\s+/gu, ' ').trim();
  if (line.length > maxLength) line = `${line.slice(0, maxLength - 1)}…`;
  const defanged = line
    .replace(/:\/\//gu, '[:]//')
    // Dotted IPv4 addresses, every dot…
    .replace(/\d{1,3}(?:\.\d{1,3}){3}/gu, (ip) => ip.replaceAll('.', '[.]'))
    // …and any dot between a letter or digit and a letter (evil.example, www.x, mail.co.uk).
    .replace(/(?<=[\p{L}\p{N}])\.(?=\p{L})/gu, '[.]')
    .replaceAll('"', "'");
  return `"${defanged}"`;
}
