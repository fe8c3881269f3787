/**
 * Controls the routing pages share: the routing peer picker (one peer or
 * groups of peers, as the API takes exactly one of them), the metric
 * input, the "unavailable" notice for a module the role may not read, and
 * the group/peer option lists the pickers show.
 */
import { Alert, NumberInput, SegmentedControl, Select, MultiSelect, Stack, Group as MGroup, Text } from "@mantine/core";
import { useMemo } from "react";
import type { Group, Peer } from "../api/client";
import type { RouterKind } from "./form";

export interface Option {
  value: string;
  label: string;
}

/** Options for group and peer pickers, sorted by name. */
export function useOptions(groups: Group[] | undefined, peers: Peer[] | undefined): { groupData: Option[]; peerData: Option[] } {
  const groupData = useMemo(() => (groups ?? []).map((g) => ({ value: g.id, label: g.name })).sort((a, b) => a.label.localeCompare(b.label)), [groups]);
  const peerData = useMemo(() => (peers ?? []).map((p) => ({ value: p.id, label: `${p.name} (${p.ip})` })).sort((a, b) => a.label.localeCompare(b.label)), [peers]);
  return { groupData, peerData };
}

export function RouterPicker({
  idPrefix,
  kind,
  peer,
  peerGroups,
  groupData,
  peerData,
  error,
  onChange,
}: {
  idPrefix: string;
  kind: RouterKind;
  peer: string;
  peerGroups: string[];
  groupData: Option[];
  peerData: Option[];
  error: string | undefined;
  onChange: (o: { kind?: RouterKind; peer?: string; peerGroups?: string[] }) => void;
}) {
  const labelId = `${idPrefix}-router-label`;
  return (
    <Stack gap={4}>
      <MGroup justify="space-between" gap="xs">
        <Text size="sm" fw={500} id={labelId}>
          Routing peer
        </Text>
        <SegmentedControl
          size="xs"
          aria-label="Routing peer: one peer or peer groups"
          value={kind}
          onChange={(v) => onChange({ kind: v as RouterKind })}
          data={[
            { value: "peer", label: "One peer" },
            { value: "groups", label: "Peer groups" },
          ]}
        />
      </MGroup>
      {kind === "peer" ? (
        <Select
          aria-labelledby={labelId}
          data={peerData}
          value={peer || null}
          onChange={(v) => onChange({ peer: v ?? "" })}
          searchable
          limit={200}
          placeholder="Pick the peer that forwards the traffic"
          error={error}
        />
      ) : (
        <MultiSelect
          aria-labelledby={labelId}
          data={groupData}
          value={peerGroups}
          onChange={(v) => onChange({ peerGroups: v })}
          searchable
          placeholder="Pick groups: each of their peers routes (high availability)"
          error={error}
        />
      )}
    </Stack>
  );
}

export function MetricInput({ value, error, onChange }: { value: number | string; error: string | undefined; onChange: (v: number | string) => void }) {
  return (
    <NumberInput
      label="Metric"
      description="1-9999; a lower metric wins"
      value={value}
      onChange={onChange}
      min={1}
      max={9999}
      allowDecimal={false}
      allowNegative={false}
      error={error}
      w={200}
    />
  );
}

/** Shown instead of a page whose module the role may not read. */
export function Unavailable({ reason }: { reason: string }) {
  return (
    <Alert color="yellow" title="Unavailable">
      {reason}.
    </Alert>
  );
}
