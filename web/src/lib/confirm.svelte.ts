import { beforeNavigate, goto } from '$app/navigation';

/**
 * The dashboard's one confirm pattern (decision 041): `await confirmAction({...})` opens the
 * modal dialog the layout holds (`ConfirmDialog.svelte`) and answers whether the reader
 * confirmed. Used before disabling an agent, turning a forbid policy off, overwriting
 * credentials, leaving unsaved changes, and other steps that are hard to undo.
 */
export interface ConfirmOptions {
  title: string;
  message: string;
  confirmLabel: string;
  cancelLabel?: string;
  /** `danger`: the confirm button is red (the step removes or stops something). */
  tone?: 'danger' | 'default';
}

interface PendingConfirm extends ConfirmOptions { resolve(confirmed: boolean): void }

export const confirmState = $state<{ pending: PendingConfirm | undefined }>({ pending: undefined });

export function confirmAction(options: ConfirmOptions): Promise<boolean> {
  confirmState.pending?.resolve(false);
  return new Promise((resolve) => {
    confirmState.pending = { ...options, resolve };
  });
}

/** Closes the open dialog with the reader's answer (the dialog component calls this). */
export function settleConfirm(confirmed: boolean): void {
  const pending = confirmState.pending;
  confirmState.pending = undefined;
  pending?.resolve(confirmed);
}

/**
 * Asks before leaving a page with unsaved changes: in-app navigation gets the confirm dialog,
 * closing or reloading the tab the browser's own prompt. Call during component init.
 */
export function guardUnsavedChanges(isDirty: () => boolean, what = 'your changes'): void {
  let leaving = false;
  beforeNavigate((navigation) => {
    if (leaving || !isDirty()) return;
    if (navigation.type === 'leave') { navigation.cancel(); return; } // the browser asks
    const target = navigation.to?.url;
    navigation.cancel();
    if (!target) return;
    void confirmAction({
      title: 'Leave without saving?',
      message: `You have not saved ${what}. If you leave now they are lost.`,
      confirmLabel: 'Leave without saving',
      cancelLabel: 'Stay on this page',
      tone: 'danger',
    }).then((leave) => {
      if (!leave) return;
      leaving = true;
      void goto(target.pathname + target.search + target.hash);
    });
  });
}
