/**
 * Copies `text` to the clipboard; where the page may not (an insecure origin, a denied
 * permission), selects `node`'s text instead so Ctrl+C (⌘C) copies it. Answers which happened.
 */
export async function copyOrSelect(text: string, node: HTMLElement | null): Promise<'copied' | 'failed'> {
  try {
    await navigator.clipboard.writeText(text);
    return 'copied';
  } catch {
    if (node) {
      const range = document.createRange();
      range.selectNodeContents(node);
      const selection = window.getSelection();
      selection?.removeAllRanges();
      selection?.addRange(range);
    }
    return 'failed';
  }
}

/** What a copy button says after it was pressed (an empty string before). */
export function copyResultText(result: '' | 'copied' | 'failed'): string {
  return result === 'copied' ? 'Copied to the clipboard.' : result === 'failed' ? 'Copying is not available here; the text is selected, press Ctrl+C (⌘C).' : '';
}
