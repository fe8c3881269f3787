import { Alert, Button, Group, Modal, Stack, type ModalProps } from "@mantine/core";
import { useState, type FormEvent, type ReactNode } from "react";
import { messageOf } from "../api/client";

/** What a create/edit dialog edits: an existing item, a new one, or nothing (closed). */
export type Editing<T> = T | "new" | null;

/** A form's errors: one message per field, and "form" for the rest. */
type Errors<K extends string> = Partial<Record<K | "form", string>>;

/**
 * useFormModal holds a create/edit dialog's state: the form (reset from the
 * item each time the dialog opens on another item, so a reopened dialog
 * never shows the last one's leftovers), its errors, and the busy flag.
 * submit checks the form locally first and sends nothing while any check
 * fails; a server refusal goes beside the control errorField names (or
 * below the form), and success closes the dialog.
 */
export function useFormModal<T extends { id: string }, F, K extends string>(editing: Editing<T>, init: (item: T | undefined) => F) {
  const [f, setF] = useState<F>(() => init(undefined));
  const [seen, setSeen] = useState<string | null>(null);
  const [errors, setErrors] = useState<Errors<K>>({});
  const [busy, setBusy] = useState(false);
  const key = editing === null ? null : editing === "new" ? "new" : editing.id;
  if (key !== seen) {
    setSeen(key);
    setF(init(editing && editing !== "new" ? editing : undefined));
    setErrors({});
  }
  /** Changes fields and clears the error of the control that changed (and the form's). */
  const set = (o: Partial<F>, clear: K) => {
    setF((x) => ({ ...x, ...o }));
    setErrors((e) => ({ ...e, [clear]: undefined, form: undefined }));
  };
  const submit =
    (
      opts: { validate: (f: F) => Errors<K>; send: (f: F) => Promise<void>; errorField: (err: unknown) => K | "form"; onClose: () => void },
    ) =>
    async (ev: FormEvent) => {
      ev.preventDefault();
      const e = opts.validate(f);
      setErrors(e);
      if (Object.keys(e).length) return;
      setBusy(true);
      try {
        await opts.send(f);
        opts.onClose();
      } catch (err) {
        setErrors({ [opts.errorField(err)]: messageOf(err) } as Errors<K>);
      } finally {
        setBusy(false);
      }
    };
  return { f, setF, errors, setErrors, busy, set, submit };
}

/**
 * FormModal is the shell of every create/edit dialog: the form's controls,
 * then Cancel and the submit button (showing progress while busy), then
 * the server's refusal when it names no control.
 */
export function FormModal({
  opened,
  title,
  size,
  onClose,
  onSubmit,
  busy,
  submitLabel,
  formError,
  children,
}: {
  opened: boolean;
  title: string;
  size?: ModalProps["size"];
  onClose: () => void;
  onSubmit: (ev: FormEvent) => Promise<void>;
  busy: boolean;
  submitLabel: string;
  formError: string | undefined;
  children: ReactNode;
}) {
  return (
    <Modal closeButtonProps={{ "aria-label": "Close" }} opened={opened} onClose={onClose} title={title} size={size}>
      <form onSubmit={(e) => void onSubmit(e)} noValidate>
        <Stack>
          {children}
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={busy}>
              {submitLabel}
            </Button>
          </Group>
          {formError && (
            <Alert color="red" role="alert" title="The server refused">
              {formError}
            </Alert>
          )}
        </Stack>
      </form>
    </Modal>
  );
}
