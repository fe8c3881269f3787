/**
 * DNS: nameserver groups, custom zones and the DNS settings, one tab each
 * (the tab is in the URL, ?tab=, so a link or a reload keeps it). Loaded
 * on first visit, with the zone page, to keep the first page small.
 */
import { Stack, Tabs, Title } from "@mantine/core";
import { useSearchParams } from "react-router";
import { usePoll } from "../api/poll";
import { useApp } from "../app";
import { NameserversPanel } from "../dns/NameserversPanel";
import { SettingsPanel } from "../dns/SettingsPanel";
import { ZonesPanel } from "../dns/ZonesPanel";
import { useOptions } from "../routing/controls";

const tabs = ["nameservers", "zones", "settings"] as const;
type Tab = (typeof tabs)[number];

export function DnsPage() {
  const { api } = useApp();
  const [params, setParams] = useSearchParams();
  const p = params.get("tab");
  const tab: Tab = tabs.find((t) => t === p) ?? "nameservers";
  const groups = usePoll((signal) => api.get("/api/groups", { signal }), 10_000, [], ["groups"]);
  const { groupData } = useOptions(groups.data, undefined);
  return (
    <Stack gap="sm">
      <Title order={2}>DNS</Title>
      <Tabs value={tab} onChange={(v) => setParams(v && v !== "nameservers" ? { tab: v } : {}, { replace: true })} keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="nameservers">Nameservers</Tabs.Tab>
          <Tabs.Tab value="zones">Zones</Tabs.Tab>
          <Tabs.Tab value="settings">Settings</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="nameservers" pt="md">
          <NameserversPanel groupData={groupData} />
        </Tabs.Panel>
        <Tabs.Panel value="zones" pt="md">
          <ZonesPanel groupData={groupData} />
        </Tabs.Panel>
        <Tabs.Panel value="settings" pt="md">
          <SettingsPanel groupData={groupData} />
        </Tabs.Panel>
      </Tabs>
    </Stack>
  );
}

export default DnsPage;
