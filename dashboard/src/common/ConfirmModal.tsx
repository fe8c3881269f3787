import { Alert, Button, Group, Modal, Stack, Text } from "@mantine/core";
import { useState, type ReactNode } from "react";
import { messageOf } from "../api/client";

/**
 * ConfirmModal asks before a destructive or consequential action and runs
 * it: the confirm button shows progress, a refusal stays in the dialog
 * with the server's message (tied to the button by errorId), and success
 * closes it. Every page's delete/revoke/approve dialog is this one.
 */
export function ConfirmModal({
  opened,
  title,
  children,
  verb,
  color = "red",
  errorId,
  errorTitle,
  onConfirm,
  onClose,
}: {
  opened: boolean;
  title: string;
  /** What will happen, in a sentence or two. */
  children: ReactNode;
  /** The confirm button's label, e.g. "Delete". */
  verb: string;
  color?: string;
  errorId: string;
  errorTitle?: string;
  /** Runs the action; a rejection keeps the dialog open with its message. */
  onConfirm: () => Promise<void>;
  onClose: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const close = () => {
    setErr("");
    onClose();
  };
  const run = async () => {
    setBusy(true);
    setErr("");
    try {
      await onConfirm();
      close();
    } catch (e) {
      setErr(messageOf(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal opened={opened} onClose={close} title={title}>
      <Stack>
        <Text size="sm">{children}</Text>
        <Group justify="flex-end">
          <Button variant="default" onClick={close}>
            Cancel
          </Button>
          <Button color={color} onClick={() => void run()} loading={busy} aria-describedby={err ? errorId : undefined}>
            {verb}
          </Button>
        </Group>
        {err && (
          <Alert color="red" role="alert" id={errorId} title={errorTitle}>
            {err}
          </Alert>
        )}
      </Stack>
    </Modal>
  );
}
