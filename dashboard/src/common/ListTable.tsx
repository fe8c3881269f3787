import { Alert, Button, Group, Stack, Switch, Table, Text, VisuallyHidden } from "@mantine/core";
import { useState, type ReactNode } from "react";
import { messageOf } from "../api/client";
import { Allowed } from "./Allowed";

/**
 * ListTable is the list pages' table: the column headers plus a last,
 * visually hidden "Actions" column, one dimmed row saying there is nothing
 * (once loading is over, so a slow first load does not flash it), and the
 * rows. A load error shows above it when given.
 */
export function ListTable({
  label,
  minWidth,
  headers,
  empty,
  loading = false,
  hover = true,
  error,
  errorTitle,
  children,
}: {
  /** The table's accessible name. */
  label: string;
  minWidth: number;
  headers: string[];
  /** Shown as the only row when there are no rows; null when there are. */
  empty: ReactNode | null;
  loading?: boolean;
  hover?: boolean;
  error?: unknown;
  errorTitle?: string;
  children: ReactNode;
}) {
  return (
    <>
      {error !== undefined && error !== null && (
        <Alert color="red" role="alert" title={errorTitle}>
          {messageOf(error)}
        </Alert>
      )}
      <Table.ScrollContainer minWidth={minWidth}>
        <Table striped highlightOnHover={hover} aria-label={label} verticalSpacing="xs">
          <Table.Thead>
            <Table.Tr>
              {headers.map((h) => (
                <Table.Th key={h}>{h}</Table.Th>
              ))}
              <Table.Th>
                <VisuallyHidden>Actions</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {empty !== null && !loading && (
              <Table.Tr>
                <Table.Td colSpan={headers.length + 1}>
                  <Text size="sm" c="dimmed">
                    {empty}
                  </Text>
                </Table.Td>
              </Table.Tr>
            )}
            {children}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
    </>
  );
}

/** The Edit and Delete buttons of a list row, each unusable (with the reason) when the user may not. */
export function RowActions({
  name,
  noUpdate,
  noDelete,
  onEdit,
  onDelete,
}: {
  /** What the buttons' accessible names say after "Edit " and "Delete ". */
  name: string;
  noUpdate: string;
  noDelete: string;
  onEdit: () => void;
  onDelete: () => void;
}) {
  return (
    <Table.Td>
      <Group gap={4} wrap="nowrap" justify="flex-end">
        <Allowed why={noUpdate}>
          <Button size="xs" variant="light" onClick={onEdit} aria-label={`Edit ${name}`}>
            Edit
          </Button>
        </Allowed>
        <Allowed why={noDelete}>
          <Button size="xs" variant="light" color="red" onClick={onDelete} aria-label={`Delete ${name}`}>
            Delete
          </Button>
        </Allowed>
      </Group>
    </Table.Td>
  );
}

/**
 * EnabledCell switches an item on or off in place: "yes"/"no" for a user
 * who may not change it, else a switch named "<name> enabled" that stays
 * put until the server agrees (the next refresh moves it) and shows the
 * server's refusal below itself.
 */
export function EnabledCell({
  enabled,
  name,
  denied,
  errorId,
  onToggle,
  onDone,
}: {
  enabled: boolean;
  name: string;
  /** Why the user may not change it; empty when they may. */
  denied: string;
  errorId: string;
  onToggle: (enabled: boolean) => Promise<unknown>;
  onDone: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  if (denied) return <Text size="sm">{enabled ? "yes" : "no"}</Text>;
  const toggle = async (on: boolean) => {
    setBusy(true);
    setErr("");
    try {
      await onToggle(on);
      onDone();
    } catch (e) {
      setErr(messageOf(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Stack gap={2}>
      <Switch checked={enabled} disabled={busy} onChange={(e) => void toggle(e.currentTarget.checked)} aria-label={`${name} enabled`} aria-describedby={err ? errorId : undefined} />
      {err && (
        <Text size="xs" c="red" role="alert" id={errorId}>
          {err}
        </Text>
      )}
    </Stack>
  );
}
