/**
 * The access policy editor: the policy's name, description, state and
 * posture checks, and its rules (action, sources and destinations as
 * groups or a single peer, protocol, ports and ranges, direction). It
 * validates before sending (policies/form.ts) and puts a server refusal
 * beside the control its message names.
 */
import {
  Alert,
  Button,
  Fieldset,
  Group,
  Modal,
  MultiSelect,
  SegmentedControl,
  Select,
  Stack,
  Switch,
  Text,
  TextInput,
  Textarea,
} from "@mantine/core";
import { useEffect, useMemo, useState, type FormEvent } from "react";
import { messageOf, type Group as ApiGroup, type Peer, type Schemas } from "../api/client";
import { useApp } from "../app";
import { fromPolicy, hasErrors, newPolicy, newRule, placeServerError, toRequest, validatePolicy, type PolicyErrors, type PolicyForm, type RuleErrors, type RuleForm } from "./form";

export interface EditorProps {
  /** null: closed; "new": create; a policy: edit it. */
  editing: Schemas["Policy"] | "new" | null;
  groups: ApiGroup[];
  peers: Peer[];
  postureChecks: Schemas["PostureCheck"][];
  onClose: () => void;
  onSaved: () => void;
}

const protocols = [
  { value: "all", label: "All" },
  { value: "tcp", label: "TCP" },
  { value: "udp", label: "UDP" },
  { value: "icmp", label: "ICMP" },
];

function Side({
  label,
  idPrefix,
  kind,
  groups,
  peer,
  groupData,
  peerData,
  error,
  onKind,
  onGroups,
  onPeer,
}: {
  label: string;
  idPrefix: string;
  kind: RuleForm["sourceKind"];
  groups: string[];
  peer: string;
  groupData: { value: string; label: string }[];
  peerData: { value: string; label: string }[];
  error: string | undefined;
  onKind: (k: RuleForm["sourceKind"]) => void;
  onGroups: (v: string[]) => void;
  onPeer: (v: string) => void;
}) {
  return (
    <Stack gap={4} style={{ flex: 1, minWidth: 240 }}>
      <Group justify="space-between" gap="xs">
        <Text size="sm" fw={500} id={`${idPrefix}-label`}>
          {label}
        </Text>
        <SegmentedControl
          size="xs"
          aria-label={`${label}: groups or a single peer`}
          value={kind}
          onChange={(v) => onKind(v as RuleForm["sourceKind"])}
          data={[
            { value: "groups", label: "Groups" },
            { value: "peer", label: "One peer" },
          ]}
        />
      </Group>
      {kind === "groups" ? (
        <MultiSelect aria-labelledby={`${idPrefix}-label`} data={groupData} value={groups} onChange={onGroups} searchable placeholder="Pick groups" error={error} />
      ) : (
        <Select aria-labelledby={`${idPrefix}-label`} data={peerData} value={peer || null} onChange={(v) => onPeer(v ?? "")} searchable limit={200} placeholder="Pick a peer" error={error} />
      )}
    </Stack>
  );
}

function RuleFields({
  n,
  rule,
  errors,
  count,
  groupData,
  peerData,
  onChange,
  onRemove,
}: {
  n: number;
  rule: RuleForm;
  errors: RuleErrors;
  count: number;
  groupData: { value: string; label: string }[];
  peerData: { value: string; label: string }[];
  onChange: (r: Partial<RuleForm>) => void;
  onRemove: () => void;
}) {
  const ports = rule.protocol === "tcp" || rule.protocol === "udp";
  return (
    <Fieldset legend={`Rule ${n + 1}`}>
      <Stack gap="sm">
        <Group align="flex-end" gap="sm" wrap="wrap">
          <TextInput label="Rule name" description="Empty: the policy's name" value={rule.name} onChange={(e) => onChange({ name: e.currentTarget.value })} error={errors.name} style={{ flex: 1, minWidth: 200 }} maxLength={255} />
          <Stack gap={4}>
            <Text size="sm" fw={500} id={`rule-${n}-action`}>
              Action
            </Text>
            <SegmentedControl
              aria-labelledby={`rule-${n}-action`}
              value={rule.action}
              onChange={(v) => onChange({ action: v as RuleForm["action"] })}
              color={rule.action === "drop" ? "red" : undefined}
              data={[
                { value: "accept", label: "Accept" },
                { value: "drop", label: "Drop" },
              ]}
            />
          </Stack>
          <Switch label="Rule enabled" checked={rule.enabled} onChange={(e) => onChange({ enabled: e.currentTarget.checked })} mb={8} />
        </Group>
        <Group align="flex-start" gap="md" wrap="wrap">
          <Side
            label="Sources"
            idPrefix={`rule-${n}-src`}
            kind={rule.sourceKind}
            groups={rule.sources}
            peer={rule.sourcePeer}
            groupData={groupData}
            peerData={peerData}
            error={errors.sources}
            onKind={(k) => onChange({ sourceKind: k })}
            onGroups={(v) => onChange({ sources: v })}
            onPeer={(v) => onChange({ sourcePeer: v })}
          />
          <Side
            label="Destinations"
            idPrefix={`rule-${n}-dst`}
            kind={rule.destinationKind}
            groups={rule.destinations}
            peer={rule.destinationPeer}
            groupData={groupData}
            peerData={peerData}
            error={errors.destinations}
            onKind={(k) => onChange({ destinationKind: k })}
            onGroups={(v) => onChange({ destinations: v })}
            onPeer={(v) => onChange({ destinationPeer: v })}
          />
        </Group>
        <Group align="flex-start" gap="sm" wrap="wrap">
          <Select
            label="Protocol"
            data={protocols}
            value={rule.protocol}
            onChange={(v) => onChange({ protocol: (v ?? "all") as RuleForm["protocol"] })}
            allowDeselect={false}
            error={errors.protocol}
            w={140}
          />
          <TextInput
            label="Ports"
            description={ports ? "e.g. 22, 443, 8000-8100; empty: all ports" : "Only with TCP or UDP"}
            placeholder={ports ? "all ports" : ""}
            value={rule.ports}
            disabled={!ports && !rule.ports}
            onChange={(e) => onChange({ ports: e.currentTarget.value })}
            error={errors.ports}
            style={{ flex: 1, minWidth: 220 }}
          />
          <Switch
            label="Bidirectional"
            description={rule.bidirectional ? "Destinations may also connect to sources" : "Only sources connect to destinations"}
            checked={rule.bidirectional}
            onChange={(e) => onChange({ bidirectional: e.currentTarget.checked })}
            mt={28}
          />
        </Group>
        {count > 1 && (
          <Group justify="flex-end">
            <Button variant="subtle" color="red" size="xs" onClick={onRemove} aria-label={`Remove rule ${n + 1}`}>
              Remove rule
            </Button>
          </Group>
        )}
      </Stack>
    </Fieldset>
  );
}

export function PolicyEditor({ editing, groups, peers, postureChecks, onClose, onSaved }: EditorProps) {
  const { api } = useApp();
  const [f, setF] = useState<PolicyForm>(newPolicy);
  const [errors, setErrors] = useState<PolicyErrors & { form?: string }>({});
  const [busy, setBusy] = useState(false);
  const id = editing && editing !== "new" ? editing.id : "";

  useEffect(() => {
    if (editing === null) return;
    setF(editing === "new" ? newPolicy() : fromPolicy(editing));
    setErrors({});
  }, [editing]);

  const groupData = useMemo(() => groups.map((g) => ({ value: g.id, label: g.name })).sort((a, b) => a.label.localeCompare(b.label)), [groups]);
  const peerData = useMemo(() => peers.map((p) => ({ value: p.id, label: `${p.name} (${p.ip})` })).sort((a, b) => a.label.localeCompare(b.label)), [peers]);
  const checkData = useMemo(() => postureChecks.map((c) => ({ value: c.id, label: c.name })), [postureChecks]);

  const set = (o: Partial<PolicyForm>, clear: keyof PolicyErrors) => {
    setF((x) => ({ ...x, ...o }));
    setErrors((e) => ({ ...e, [clear]: undefined, form: undefined }));
  };
  const setRule = (i: number, o: Partial<RuleForm>) => {
    setF((x) => ({ ...x, rules: x.rules.map((r, j) => (j === i ? { ...r, ...o } : r)) }));
    setErrors((e) => {
      if (!e.rule?.[i]) return { ...e, form: undefined };
      const rule = [...e.rule];
      const cur = { ...rule[i] };
      for (const k of Object.keys(o)) {
        if (k === "sources" || k === "sourcePeer" || k === "sourceKind") delete cur.sources;
        else if (k === "destinations" || k === "destinationPeer" || k === "destinationKind") delete cur.destinations;
        else if (k === "ports" || k === "protocol") {
          delete cur.ports;
          delete cur.protocol;
        } else delete cur[k as keyof RuleErrors];
      }
      rule[i] = cur;
      return { ...e, rule, form: undefined };
    });
  };

  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validatePolicy(f);
    setErrors(e);
    if (hasErrors(e)) return;
    setBusy(true);
    try {
      const body = toRequest(f);
      if (id) await api.put("/api/policies/{policyId}", { path: { policyId: id }, body });
      else await api.post("/api/policies", { body });
      onSaved();
      onClose();
    } catch (err) {
      const msg = messageOf(err);
      const at = placeServerError(msg, f.rules.length);
      if ("rule" in at) {
        const rule: RuleErrors[] = f.rules.map(() => ({}));
        rule[at.rule] = { [at.field]: msg };
        setErrors({ rule });
      } else {
        setErrors({ [at.field]: msg });
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <Modal closeButtonProps={{ "aria-label": "Close" }} opened={editing !== null} onClose={onClose} title={id ? `Edit policy ${f.name}` : "Create an access policy"} size="xl">
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Stack>
          <Group align="flex-start" gap="sm" wrap="wrap">
            <TextInput label="Name" required value={f.name} onChange={(e) => set({ name: e.currentTarget.value }, "name")} error={errors.name} data-autofocus style={{ flex: 1, minWidth: 220 }} maxLength={255} />
            <Switch label="Enabled" checked={f.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked }, "name")} mt={32} />
          </Group>
          <Textarea label="Description" autosize minRows={1} maxRows={4} value={f.description} onChange={(e) => set({ description: e.currentTarget.value }, "description")} error={errors.description} />
          <MultiSelect
            label="Posture checks"
            description="Source peers must pass every check for the rules to apply to them"
            data={checkData}
            value={f.postureChecks}
            onChange={(v) => set({ postureChecks: v }, "postureChecks")}
            placeholder={checkData.length ? "None" : "No posture checks defined"}
            searchable
            clearable
            error={errors.postureChecks}
          />
          {f.rules.map((r, i) => (
            <RuleFields
              key={i}
              n={i}
              rule={r}
              errors={errors.rule?.[i] ?? {}}
              count={f.rules.length}
              groupData={groupData}
              peerData={peerData}
              onChange={(o) => setRule(i, o)}
              onRemove={() => setF((x) => ({ ...x, rules: x.rules.filter((_, j) => j !== i) }))}
            />
          ))}
          {errors.rules && (
            <Text size="sm" c="red" role="alert">
              {errors.rules}
            </Text>
          )}
          <Group justify="space-between">
            <Button variant="light" onClick={() => setF((x) => ({ ...x, rules: [...x.rules, newRule()] }))}>
              Add rule
            </Button>
            <Group>
              <Button variant="default" onClick={onClose}>
                Cancel
              </Button>
              <Button type="submit" loading={busy}>
                {id ? "Save policy" : "Create policy"}
              </Button>
            </Group>
          </Group>
          {errors.form && (
            <Alert color="red" role="alert" title="The server refused">
              {errors.form}
            </Alert>
          )}
        </Stack>
      </form>
    </Modal>
  );
}
