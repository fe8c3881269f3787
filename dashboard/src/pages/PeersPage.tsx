/**
 * Peers: every machine in the account, refreshed every 2 s, searched,
 * filtered and sorted in the browser (peers/filter.ts), drawn as a
 * virtualised grid so 5,000 rows scroll smoothly.
 */
import { Alert, Anchor, Badge, Box, Group, Select, Stack, Text, TextInput, Title, Tooltip, UnstyledButton } from "@mantine/core";
import { useVirtualizer } from "@tanstack/react-virtual";
import { memo, useDeferredValue, useEffect, useMemo, useRef, useState } from "react";
import { Link as RouterLink } from "react-router";
import { messageOf, type Peer } from "../api/client";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { defaultQuery, filterPeers, lastSeenText, osFamilies, prepareSearch, sortPeers, type PeerQuery, type SortKey, type StatusFilter } from "../peers/filter";
import { connectionsText } from "../peers/connections";
import classes from "./PeersPage.module.css";

const ROW_HEIGHT = 52;

interface Column {
  key: string;
  label: string;
  sort?: SortKey;
}
const columns: Column[] = [
  { key: "name", label: "Name", sort: "name" },
  { key: "address", label: "Address", sort: "ip" },
  { key: "status", label: "Status", sort: "connected" },
  { key: "connection", label: "Connection" },
  { key: "links", label: "P2P / relayed" },
  { key: "os", label: "OS", sort: "os" },
  { key: "version", label: "Agent", sort: "version" },
  { key: "groups", label: "Groups" },
  { key: "approval", label: "Approval" },
];

const statusOptions: { value: StatusFilter; label: string }[] = [
  { value: "all", label: "All peers" },
  { value: "online", label: "Online" },
  { value: "offline", label: "Offline" },
  { value: "pending", label: "Pending approval" },
  { value: "expired", label: "Login expired" },
];

function StatusCell({ p }: { p: Peer }) {
  return p.connected ? (
    <Badge color="green" variant="light">
      online
    </Badge>
  ) : (
    <Tooltip label={p.last_seen ? new Date(p.last_seen).toLocaleString() : "never"}>
      <Text size="sm" c="dimmed" tabIndex={-1}>
        {lastSeenText(p)}
      </Text>
    </Tooltip>
  );
}

function GroupsCell({ p }: { p: Peer }) {
  const shown = p.groups.filter((g) => g.name !== "All");
  const first = shown.slice(0, 2);
  const more = shown.length - first.length;
  return (
    <Group gap={4} wrap="nowrap" title={shown.map((g) => g.name).join(", ")}>
      {first.map((g) => (
        <Badge key={g.id} variant="outline" size="sm" className={classes.badge}>
          {g.name}
        </Badge>
      ))}
      {more > 0 && (
        <Badge variant="default" size="sm">
          +{more}
        </Badge>
      )}
      {shown.length === 0 && (
        <Text size="sm" c="dimmed">
          —
        </Text>
      )}
    </Group>
  );
}

// A row renders again only when its peer object changes (a refresh), not
// when a search moves it within the list.
const Row = memo(function Row({ p }: { p: Peer }) {
  return (
    <>
      <div role="cell" className={classes.cell}>
        <Anchor component={RouterLink} to={`/peers/${encodeURIComponent(p.id)}`} size="sm" fw={500} truncate="end" display="block" underline="hover">
          {p.name}
        </Anchor>
        {p.hostname && p.hostname !== p.name && (
          <Text size="xs" c="dimmed" truncate="end">
            {p.hostname}
          </Text>
        )}
      </div>
      <div role="cell" className={classes.cell}>
        <Text size="sm" ff="monospace">
          {p.ip}
        </Text>
        {p.dns_label && (
          <Text size="xs" c="dimmed" truncate="end">
            {p.dns_label}
          </Text>
        )}
      </div>
      <div role="cell" className={classes.cell}>
        <StatusCell p={p} />
      </div>
      <div role="cell" className={classes.cell}>
        <Text size="sm" ff="monospace" c={p.connection_ip ? undefined : "dimmed"} truncate="end">
          {p.connection_ip || "—"}
        </Text>
      </div>
      <div role="cell" className={classes.cell}>
        <Text size="sm" c={p.connections ? undefined : "dimmed"} truncate="end" title="Connections to other peers, as the peer's wiremesh agent reports them">
          {connectionsText(p)}
        </Text>
      </div>
      <div role="cell" className={classes.cell}>
        <Text size="sm" truncate="end" title={p.kernel_version || p.os}>
          {p.os || "—"}
        </Text>
      </div>
      <div role="cell" className={classes.cell}>
        <Text size="sm" truncate="end" title={p.version}>
          {p.version || "—"}
        </Text>
      </div>
      <div role="cell" className={classes.cell}>
        <GroupsCell p={p} />
      </div>
      <div role="cell" className={classes.cell}>
        {p.approval_required ? (
          <Badge color="yellow" variant="light">
            pending
          </Badge>
        ) : p.login_expired ? (
          <Badge color="red" variant="light">
            login expired
          </Badge>
        ) : (
          <Text size="sm" c="dimmed">
            approved
          </Text>
        )}
      </div>
    </>
  );
});

type Choice = { value: string; label: string };

/**
 * The previous choices while a refresh brings the same ones, so that the
 * filter pickers (and the list of every group) are not rendered again every
 * 2 s.
 */
function useSameChoices(next: Choice[]): Choice[] {
  const [kept, setKept] = useState(next);
  const same = kept.length === next.length && kept.every((c, i) => c.value === next[i]?.value && c.label === next[i]?.label);
  if (!same) setKept(next);
  return same ? kept : next;
}

export function PeersPage() {
  const { api } = useApp();
  const peers = usePoll((signal) => api.get("/api/peers", { signal }), LIVE_INTERVAL_MS, [], ["peers"]);
  const [q, setQ] = useState<PeerQuery>(defaultQuery);
  // The list follows the search box at a lower priority than the typing
  // (React drops stale renders), so no debounce delays it.
  const search = useDeferredValue(q.search);
  const all = useMemo(() => peers.data ?? [], [peers.data]);

  const groups = useSameChoices(
    useMemo(() => {
      const m = new Map<string, string>();
      for (const p of all) for (const g of p.groups) m.set(g.id, g.name);
      return [...m].map(([value, label]) => ({ value, label })).sort((a, b) => a.label.localeCompare(b.label));
    }, [all]),
  );
  const oses = useSameChoices(useMemo(() => osFamilies(all).map((o) => ({ value: o, label: o })), [all]));
  // Sorted once per list or sort change; a search only filters the sorted
  // list (filtering keeps the order), so a keystroke over 5,000 peers costs
  // a scan, not a sort.
  const sorted = useMemo(() => sortPeers(all, q.sort, q.dir), [all, q.sort, q.dir]);
  useEffect(() => prepareSearch(all), [all]); // after the paint, not on a keystroke
  const rows = useMemo(() => filterPeers(sorted, { search, status: q.status, group: q.group, os: q.os }), [sorted, search, q.status, q.group, q.os]);
  const online = useMemo(() => all.filter((p) => p.connected).length, [all]);

  const scrollRef = useRef<HTMLDivElement>(null);
  const virt = useVirtualizer({ count: rows.length, getScrollElement: () => scrollRef.current, estimateSize: () => ROW_HEIGHT, overscan: 12 });

  // The filter pickers (one lists every group) are not rendered again on a
  // keystroke in the search box.
  const filters = useMemo(
    () => (
      <>
        <Select label="Status" data={statusOptions} value={q.status} onChange={(v) => setQ((o) => ({ ...o, status: (v as StatusFilter) ?? "all" }))} allowDeselect={false} w={180} />
        <Select label="Group" data={groups} value={q.group || null} onChange={(v) => setQ((o) => ({ ...o, group: v ?? "" }))} placeholder="Any group" clearable searchable w={200} />
        <Select label="OS" data={oses} value={q.os || null} onChange={(v) => setQ((o) => ({ ...o, os: v ?? "" }))} placeholder="Any OS" clearable w={160} />
      </>
    ),
    [q.status, q.group, q.os, groups, oses],
  );

  const sortBy = (k: SortKey) =>
    setQ((o) => ({ ...o, sort: k, dir: o.sort === k && o.dir === "asc" ? "desc" : "asc" }));

  return (
    <Stack gap="sm" h="calc(100vh - 56px - 2 * var(--mantine-spacing-md))">
      <Group justify="space-between" align="baseline">
        <Title order={2}>Peers</Title>
        <Text size="sm" c="dimmed" aria-live="polite">
          {peers.loading && !peers.data ? "Loading…" : `${rows.length} shown of ${all.length} · ${online} online`}
        </Text>
      </Group>
      <Group gap="sm" align="flex-end" wrap="wrap">
        <TextInput
          label="Search peers"
          placeholder="name, address, OS, group…"
          value={q.search}
          onChange={(e) => {
            const v = e.currentTarget.value;
            setQ((o) => ({ ...o, search: v }));
          }}
          w={280}
          type="search"
        />
        {filters}
      </Group>
      {peers.error !== null && (
        <Alert color="red" role="alert" title="Could not load the peers">
          {messageOf(peers.error)}
          {peers.data ? " (showing the last list received)" : ""}
        </Alert>
      )}
      <Box
        ref={scrollRef}
        className={classes.table}
        role="table"
        aria-label="Peers (scroll with the arrow keys)"
        aria-rowcount={rows.length + 1}
        tabIndex={0}
      >
        <div role="rowgroup" className={classes.headGroup}>
          <div role="row" className={`${classes.row} ${classes.head}`} aria-rowindex={1}>
            {columns.map((c) => {
              const active = c.sort && q.sort === c.sort;
              return (
                <div
                  key={c.key}
                  role="columnheader"
                  className={classes.cell}
                  aria-sort={active ? (q.dir === "asc" ? "ascending" : "descending") : c.sort ? "none" : undefined}
                >
                  {c.sort ? (
                    <UnstyledButton onClick={() => c.sort && sortBy(c.sort)} className={classes.sortButton} aria-label={`Sort by ${c.label}`}>
                      {c.label}
                      <span aria-hidden="true">{active ? (q.dir === "asc" ? " ▲" : " ▼") : ""}</span>
                    </UnstyledButton>
                  ) : (
                    c.label
                  )}
                </div>
              );
            })}
          </div>
        </div>
        <div role="rowgroup">
          {rows.length === 0 && !peers.loading && (
            <Text p="lg" c="dimmed" role="row">
              <span role="cell">{all.length === 0 ? "No peers yet: create a setup key and join a machine with it." : "No peer matches the search and filters."}</span>
            </Text>
          )}
          <div style={{ height: virt.getTotalSize(), position: "relative" }}>
            {virt.getVirtualItems().map((vi) => {
              const p = rows[vi.index];
              if (!p) return null;
              return (
                <div
                  key={p.id}
                  role="row"
                  aria-rowindex={vi.index + 2}
                  className={classes.row}
                  data-peer-name={p.name}
                  style={{ position: "absolute", top: 0, left: 0, right: 0, height: ROW_HEIGHT, transform: `translateY(${vi.start}px)` }}
                >
                  <Row p={p} />
                </div>
              );
            })}
          </div>
        </div>
      </Box>
    </Stack>
  );
}
