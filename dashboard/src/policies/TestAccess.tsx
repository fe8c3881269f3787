/**
 * "Test access": can peer A open a connection to peer B with this protocol
 * and port? Answered in the browser from the current policies, groups and
 * peers (access/evaluate.ts), as the answer changes while the admin types.
 */
import { Alert, Button, Card, Group, SegmentedControl, Select, Stack, Text, TextInput, Title } from "@mantine/core";
import { useMemo, useState } from "react";
import type { Peer } from "../api/client";
import { testAccess, type AccessIndex, type Protocol } from "../access/evaluate";
import { checkQuestion, portOf, type Question } from "../access/question";

const colors = { allowed: "green", denied: "red", depends: "yellow" } as const;
const titles = { allowed: "Allowed", denied: "Denied", depends: "Depends on posture checks" } as const;

export function TestAccess({ index, peers, initialFrom = "" }: { index: AccessIndex | undefined; peers: Peer[]; initialFrom?: string }) {
  const [q, setQ] = useState<Question>({ from: initialFrom, to: "", protocol: "tcp", port: "22" });
  const [touched, setTouched] = useState(false);
  const peerData = useMemo(() => peers.map((p) => ({ value: p.id, label: `${p.name} (${p.ip})` })).sort((a, b) => a.label.localeCompare(b.label)), [peers]);
  const errors = checkQuestion(q);
  const ready = Object.keys(errors).length === 0;
  const verdict = useMemo(() => (ready && index ? testAccess(index, q.from, q.to, q.protocol, portOf(q)) : null), [ready, index, q]);
  const show = (k: keyof Question) => (touched || (k !== "port" && q[k] !== "") ? errors[k] : undefined);
  const update = (o: Partial<Question>) => {
    setQ((x) => ({ ...x, ...o }));
  };

  return (
    <Card withBorder>
      <Stack>
        <Title order={3} size="h4">
          Test access
        </Title>
        <Text size="sm" c="dimmed">
          Can one peer open a connection to another? The answer comes from the enabled policies as they are now, the way the agents apply them.
        </Text>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            setTouched(true);
          }}
          noValidate
        >
          <Group align="flex-start" gap="sm" wrap="wrap">
            <Select label="From peer" data={peerData} value={q.from || null} onChange={(v) => update({ from: v ?? "" })} searchable limit={200} placeholder="Pick a peer" error={touched ? errors.from : undefined} w={260} />
            <Button
              variant="subtle"
              mt={25}
              onClick={() => update({ from: q.to, to: q.from })}
              aria-label="Swap the two peers"
              title="Swap the two peers"
            >
              ⇄
            </Button>
            <Select label="To peer" data={peerData} value={q.to || null} onChange={(v) => update({ to: v ?? "" })} searchable limit={200} placeholder="Pick a peer" error={show("to")} w={260} />
            <Stack gap={4}>
              <Text size="sm" fw={500} id="test-proto">
                Protocol
              </Text>
              <SegmentedControl
                aria-labelledby="test-proto"
                value={q.protocol}
                onChange={(v) => update({ protocol: v as Protocol })}
                data={[
                  { value: "tcp", label: "TCP" },
                  { value: "udp", label: "UDP" },
                  { value: "icmp", label: "ICMP" },
                ]}
              />
            </Stack>
            <TextInput
              label="Port"
              inputMode="numeric"
              value={q.protocol === "icmp" ? "" : q.port}
              disabled={q.protocol === "icmp"}
              placeholder={q.protocol === "icmp" ? "no ports" : "22"}
              onChange={(e) => update({ port: e.currentTarget.value })}
              error={q.protocol === "icmp" ? undefined : show("port") ?? (q.port.trim() && errors.port ? errors.port : undefined)}
              w={110}
            />
            <Button type="submit" mt={25}>
              Test
            </Button>
          </Group>
        </form>
        <div aria-live="polite">
          {verdict && (
            <Alert color={colors[verdict.kind]} title={titles[verdict.kind]} role="status" data-testid="access-verdict" data-verdict={verdict.kind}>
              {verdict.message}.
            </Alert>
          )}
          {!index && ready && <Text c="dimmed">Loading the policies…</Text>}
        </div>
      </Stack>
    </Card>
  );
}
