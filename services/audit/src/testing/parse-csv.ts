/**
 * A strict RFC 4180 reader for checking exports: quoted fields may hold commas, quotes
 * (doubled) and line breaks; records end with CRLF. Throws on anything malformed.
 */
export function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let i = 0;
  while (i < text.length) {
    let field = '';
    if (text[i] === '"') {
      i += 1;
      for (;;) {
        if (i >= text.length) throw new Error('unterminated quoted field');
        if (text[i] === '"') {
          if (text[i + 1] === '"') { field += '"'; i += 2; continue; }
          i += 1;
          break;
        }
        field += text[i];
        i += 1;
      }
    } else {
      while (i < text.length && text[i] !== ',' && text[i] !== '\r' && text[i] !== '\n') {
        if (text[i] === '"') throw new Error(`bare quote in unquoted field at ${i}`);
        field += text[i];
        i += 1;
      }
    }
    record.push(field);
    if (text[i] === ',') { i += 1; continue; }
    if (text.startsWith('\r\n', i)) { records.push(record); record = []; i += 2; continue; }
    if (i >= text.length) { records.push(record); break; }
    throw new Error(`unexpected character ${JSON.stringify(text[i])} at ${i}`);
  }
  return records;
}
