/**
 * DNS settings: the groups whose peers get no DNS configuration from the
 * mesh (they keep their own resolver setup). The choice is a draft until
 * saved, so the live refresh does not undo what the admin is picking.
 */
import { Alert, Button, Group, MultiSelect, Stack, Text } from "@mantine/core";
import { useState, type FormEvent } from "react";
import { messageOf } from "../api/client";
import { usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import { Unavailable, type Option } from "../routing/controls";
import { fieldOf } from "../api/fielderror";

export function SettingsPanel({ groupData }: { groupData: Option[] }) {
  const { api } = useApp();
  const { me } = useCurrentUser();
  const noRead = me ? deniedReason(me, "dns", "read") : "";
  const noUpdate = deniedReason(me, "dns", "update");
  const settings = usePoll((signal) => (noRead ? Promise.resolve(null) : api.get("/api/dns/settings", { signal })), 10_000, [noRead], ["dns"]);
  const [draft, setDraft] = useState<string[] | null>(null);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<{ field: boolean; msg: string } | null>(null);
  const [saved, setSaved] = useState(false);
  const value = draft ?? settings.data?.disabled_management_groups ?? [];
  const save = async (ev: FormEvent) => {
    ev.preventDefault();
    setBusy(true);
    setErr(null);
    setSaved(false);
    try {
      await api.put("/api/dns/settings", { body: { disabled_management_groups: value } });
      await settings.reload();
      setDraft(null);
      setSaved(true);
    } catch (e) {
      setErr({ field: fieldOf(e, { disabled_management_groups: "groups" } as const) === "groups", msg: messageOf(e) });
    } finally {
      setBusy(false);
    }
  };
  if (noRead) return <Unavailable reason={noRead} />;
  return (
    <form onSubmit={(e) => void save(e)} noValidate>
      <Stack gap="sm" maw={720}>
        {settings.error !== null && (
          <Alert color="red" role="alert" title="Could not load the DNS settings">
            {messageOf(settings.error)}
          </Alert>
        )}
        <MultiSelect
          label="Groups without DNS management"
          description="Peers in these groups get no nameservers, zones or mesh names from here: their own resolver setup stays as it is"
          data={groupData}
          value={value}
          onChange={(v) => {
            setDraft(v);
            setSaved(false);
            setErr(null);
          }}
          searchable
          clearable
          placeholder={value.length ? undefined : "None: every peer's DNS is managed"}
          disabled={settings.data === undefined}
          readOnly={Boolean(noUpdate)}
          error={err?.field ? err.msg : undefined}
        />
        <Group justify="flex-end" gap="sm">
          {saved && (
            <Text size="sm" c="teal.8" role="status">
              Saved
            </Text>
          )}
          {draft !== null && (
            <Button variant="default" onClick={() => setDraft(null)}>
              Discard changes
            </Button>
          )}
          <Allowed why={noUpdate}>
            <Button type="submit" loading={busy} disabled={settings.data === undefined}>
              Save DNS settings
            </Button>
          </Allowed>
        </Group>
        {err && !err.field && (
          <Alert color="red" role="alert" title="The server refused">
            {err.msg}
          </Alert>
        )}
      </Stack>
    </form>
  );
}
