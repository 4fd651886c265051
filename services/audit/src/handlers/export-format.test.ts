import { describe, expect, it } from 'vitest';
import { makeEntry } from '../testing/audit-entries.ts';
import { CSV_HEADER, csvField, csvLine, formulaGuard, ndjsonLine } from './export-format.ts';

describe('csvField', () => {
  it.each([
    ['plain', 'plain'],
    ['', ''],
    ['a,b', '"a,b"'],
    ['say "hi"', '"say ""hi"""'],
    ['line1\nline2', '"line1\nline2"'],
    ['cr\rhere', '"cr\rhere"'],
    ["O'Brien; semi", "O'Brien; semi"],
  ])('%j → %j', (input, expected) => {
    expect(csvField(input)).toBe(expected);
  });
});

describe('CSV export records', () => {
  it('has the spec columns and no callerIp', () => {
    expect(CSV_HEADER).toBe('timestamp,agent,member,tool,service,resource,decision,reason,duration,matched_policy_ids\r\n');
    expect(CSV_HEADER).not.toMatch(/ip/i);
  });

  it('writes one record per entry in column order', () => {
    const entry = makeEntry({
      timestamp: '2026-10-01T12:00:00.123Z', agentName: 'Ops, "prod"', memberName: 'maria@example.com', tool: 'delete_repo',
      service: 'github', resource: 'GithubMCP::Repository::"acme/api"', decision: 'DENY', reason: 'Blocked\nafter hours',
      durationMs: 3.25, matchedPolicyIds: ['night-forbid', 'repo-guard'], callerIp: '198.51.100.23',
    });
    expect(csvLine(entry)).toBe(
      '2026-10-01T12:00:00.123Z,"Ops, ""prod""",maria@example.com,delete_repo,github,"GithubMCP::Repository::""acme/api""",DENY,"Blocked\nafter hours",3.25,night-forbid;repo-guard\r\n',
    );
    expect(csvLine(entry)).not.toContain('198.51.100.23');
  });
});

describe('formulaGuard', () => {
  it.each([
    ['=SUM(A1)', "'=SUM(A1)"],
    ['+1 555', "'+1 555"],
    ['-2+3', "'-2+3"],
    ['@cmd', "'@cmd"],
    ['\tx', "'\tx"],
    ['\rx', "'\rx"],
    ['a=b', 'a=b'],
    ['', ''],
    ["'quoted", "'quoted"],
  ])('%j → %j', (input, expected) => {
    expect(formulaGuard(input)).toBe(expected);
  });

  it('guards text cells before quoting them, and leaves timestamp, decision and duration alone', () => {
    const entry = makeEntry({ agentName: '=HYPERLINK("x")', reason: '-1', matchedPolicyIds: ['@a', 'b'], memberName: 'ok', durationMs: 2 });
    expect(csvLine(entry)).toBe(`${entry.timestamp},"'=HYPERLINK(""x"")",ok,create_issue,github,"GithubMCP::Repository::""acme/api""",ALLOW,'-1,2,'@a;b\r\n`);
  });
});

describe('ndjsonLine', () => {
  it('is one JSON object per line', () => {
    const entry = makeEntry({ reason: 'a\nb' });
    const line = ndjsonLine(entry);
    expect(line.endsWith('\n')).toBe(true);
    expect(line.slice(0, -1)).not.toContain('\n');
    expect(JSON.parse(line)).toEqual(entry);
  });
});
