import { sql } from 'drizzle-orm';
import { openWithSecret, unwrapPrivateKey, openSealed, type Database } from '@portcullis/core';

/** Every label the code seals values under with the server secret (an attacker has the code). */
const SECRET_BOX_LABELS = [
  'connector-client-secret', 'connector-webhook-secret', 'oauth-code-verifier', 'oauth-registered-client-secret', 'mfa-totp', 'portcullis/invite-token/v1',
];

function stringsIn(value: unknown, out: string[]): void {
  if (typeof value === 'string') {
    out.push(value);
    try { stringsIn(JSON.parse(value), out); } catch { /* not JSON */ }
  } else if (Array.isArray(value)) {
    for (const item of value) stringsIn(item, out);
  } else if (value !== null && typeof value === 'object') {
    for (const item of Object.values(value)) stringsIn(item, out);
  }
}

/**
 * What an attacker holding a dump of every table and the server secret (but no member key)
 * can read: every string value of every row, plus whatever opens with the secret under any
 * label the code uses, plus whatever a vault private key unwrapped with any string of the
 * dump (or the secret) opens. Returns all of it, for tests to search for tokens.
 */
export async function recoverWithDumpAndSecret(db: Database, serverSecret: string): Promise<string[]> {
  const rowsOf = async (query: ReturnType<typeof sql>) => ((await db.execute(query)) as unknown as { rows: Array<Record<string, unknown>> }).rows;
  const tables = await rowsOf(sql`select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`) as Array<{ table_name: string }>;
  const dump: string[] = [];
  const rowsByTable: Record<string, Array<Record<string, unknown>>> = {};
  for (const { table_name } of tables) {
    const rows = await rowsOf(sql`select * from ${sql.identifier(table_name)}`);
    rowsByTable[table_name] = rows;
    stringsIn(rows, dump);
  }
  const recovered = [...dump];
  for (const value of dump) {
    for (const label of SECRET_BOX_LABELS) {
      try { recovered.push(openWithSecret(serverSecret, label, value)); } catch { /* not sealed under this label */ }
    }
  }
  // Try to unwrap each member's vault with the secret and with every string the dump holds.
  const candidates = [serverSecret, ...new Set(dump)];
  for (const member of rowsByTable.members ?? []) {
    const wrapped = member.vault_wrapped_private_key;
    if (typeof wrapped !== 'string') continue;
    for (const candidate of candidates) {
      try {
        const privateKey = unwrapPrivateKey(String(member.id), wrapped, candidate);
        for (const value of dump) {
          try { recovered.push(openSealed(privateKey, value)); } catch { /* not sealed to this member */ }
        }
      } catch { /* not the member key */ }
    }
  }
  return recovered;
}
