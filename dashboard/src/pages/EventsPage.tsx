/**
 * Activity log: every audit event of the account, newest first, refreshed
 * every few seconds. The API answers the whole log without filters or
 * pages (GET /api/events/audit), so filtering happens here (events/filter.ts).
 */
import { Alert, Badge, Button, Code, Group, MultiSelect, Select, Stack, Table, Text, TextInput, Title } from "@mantine/core";
import { useDebouncedValue } from "@mantine/hooks";
import { useMemo, useState } from "react";
import { messageOf } from "../api/client";
import { usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import { areaOf, describeCode, knownCodes } from "../events/codes";
import { emptyQuery, filterEvents, initiatorsOf, rangeError, type EventQuery } from "../events/filter";

const PAGE = 200;

export function EventsPage() {
  const { api } = useApp();
  const { me } = useCurrentUser();
  const events = usePoll((signal) => api.get("/api/events/audit", { signal }), 5000, [], ["events"]);
  const [q, setQ] = useState<EventQuery>(emptyQuery);
  const [shown, setShown] = useState(PAGE);
  const [debounced] = useDebouncedValue(q, 150);
  const set = <K extends keyof EventQuery>(k: K, v: EventQuery[K]) => {
    setQ((o) => ({ ...o, [k]: v }));
    setShown(PAGE);
  };
  const all = useMemo(() => events.data ?? [], [events.data]);
  const rangeErr = rangeError(q);
  const list = useMemo(() => (rangeError(debounced) ? all : filterEvents(all, debounced)), [all, debounced]);
  const codeData = useMemo(() => {
    const codes = new Set([...knownCodes(), ...all.map((e) => e.activity_code)]);
    const byArea = new Map<string, { value: string; label: string }[]>();
    for (const c of codes) {
      const a = areaOf(c);
      byArea.set(a, [...(byArea.get(a) ?? []), { value: c, label: describeCode(c) }]);
    }
    return [...byArea].sort(([a], [b]) => a.localeCompare(b)).map(([group, items]) => ({ group, items: items.sort((x, y) => x.label.localeCompare(y.label)) }));
  }, [all]);
  const initiators = useMemo(() => initiatorsOf(all), [all]);
  const filtered = JSON.stringify(q) !== JSON.stringify(emptyQuery);
  const noRead = deniedReason(me, "events", "read");

  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Title order={2}>Activity</Title>
        <Text size="sm" c="dimmed" aria-live="polite">
          {events.loading ? "Loading…" : `${list.length} of ${all.length} events`}
        </Text>
      </Group>
      {me && noRead && <Alert color="yellow">{noRead}.</Alert>}
      {events.error !== null && (
        <Alert color="red" role="alert" title="Could not load the activity log">
          {messageOf(events.error)}
        </Alert>
      )}
      <Group align="flex-end" gap="sm" wrap="wrap">
        <TextInput label="Search" placeholder="Description, person, name…" value={q.text} onChange={(e) => set("text", e.currentTarget.value)} w={240} />
        <MultiSelect label="Activity" placeholder="Any activity" data={codeData} value={q.codes} onChange={(v) => set("codes", v)} searchable clearable w={300} />
        <Select label="Initiator" placeholder="Anyone" data={initiators} value={q.initiator || null} onChange={(v) => set("initiator", v ?? "")} searchable clearable w={200} />
        <TextInput label="Target" placeholder="ID, name or e-mail" value={q.target} onChange={(e) => set("target", e.currentTarget.value)} w={200} />
        <TextInput label="From" type="date" value={q.from} onChange={(e) => set("from", e.currentTarget.value)} error={rangeErr && rangeErr.includes("start") ? rangeErr : undefined} w={160} />
        <TextInput label="To" type="date" value={q.to} onChange={(e) => set("to", e.currentTarget.value)} error={rangeErr && !rangeErr.includes("start") ? rangeErr : undefined} w={160} />
        <Allowed why={filtered ? "" : "No filter is set"}>
          <Button variant="default" onClick={() => (setQ(emptyQuery), setShown(PAGE))}>
            Clear filters
          </Button>
        </Allowed>
      </Group>
      <Table.ScrollContainer minWidth={900}>
        <Table striped aria-label="Activity log" verticalSpacing="xs">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>When</Table.Th>
              <Table.Th>Activity</Table.Th>
              <Table.Th>By</Table.Th>
              <Table.Th>Target</Table.Th>
              <Table.Th>Details</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {list.length === 0 && !events.loading && (
              <Table.Tr>
                <Table.Td colSpan={5}>
                  <Text size="sm" c="dimmed">
                    {all.length ? "No event matches the filters." : "No events yet."}
                  </Text>
                </Table.Td>
              </Table.Tr>
            )}
            {list.slice(0, shown).map((e) => (
              <Table.Tr key={e.id}>
                <Table.Td>
                  <Text size="sm" title={e.timestamp}>
                    {new Date(e.timestamp).toLocaleString()}
                  </Text>
                </Table.Td>
                <Table.Td>
                  <Text size="sm" fw={500}>
                    {describeCode(e.activity_code)}
                  </Text>
                  <Badge variant="outline" size="xs" color="gray" tt="none">
                    {e.activity_code}
                  </Badge>
                </Table.Td>
                <Table.Td>
                  <Text size="sm">{e.initiator_name || e.initiator_id || "system"}</Text>
                  {e.initiator_email && (
                    <Text size="xs" c="dimmed">
                      {e.initiator_email}
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>
                  <Text size="sm">{e.meta?.name || e.meta?.email || ""}</Text>
                  <Code fz="xs">{e.target_id || "—"}</Code>
                </Table.Td>
                <Table.Td>
                  <Text size="xs" c="dimmed" style={{ wordBreak: "break-word" }}>
                    {Object.entries(e.meta ?? {})
                      .map(([k, v]) => `${k}: ${v}`)
                      .join(" · ")}
                  </Text>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      {list.length > shown && (
        <Group justify="center">
          <Button variant="default" onClick={() => setShown((n) => n + PAGE)}>
            Show {Math.min(PAGE, list.length - shown)} more ({list.length - shown} left)
          </Button>
        </Group>
      )}
    </Stack>
  );
}

export default EventsPage;
