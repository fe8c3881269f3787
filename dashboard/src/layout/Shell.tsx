/**
 * The frame of every page: a header with the theme toggle and the user
 * menu, and the navigation. Pages of issue 19 not built yet are listed as
 * "coming" and disabled, so the layout does not change when they arrive:
 * add the page to `nav` with its path and a route in Routes.tsx.
 */
import {
  ActionIcon,
  AppShell,
  Badge,
  Burger,
  Group,
  Menu,
  NavLink,
  Text,
  Title,
  UnstyledButton,
  useComputedColorScheme,
  useMantineColorScheme,
} from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { NavLink as RouterNavLink, Outlet, useLocation } from "react-router";
import { useApp } from "../app";
import { useUser } from "../auth/useUser";

interface NavItem {
  label: string;
  path?: string; // undefined: coming
}

export const nav: NavItem[] = [
  { label: "Peers", path: "/peers" },
  { label: "Setup keys", path: "/setup-keys" },
  { label: "Groups", path: "/groups" },
  { label: "Access policies", path: "/policies" },
  { label: "Posture checks", path: "/posture-checks" },
  { label: "Users", path: "/users" },
  { label: "Service users & tokens", path: "/service-users" },
  { label: "Networks", path: "/networks" },
  { label: "Routes", path: "/routes" },
  { label: "DNS", path: "/dns" },
  { label: "Activity", path: "/events" },
  { label: "Settings", path: "/settings" },
];

function ThemeToggle() {
  const { setColorScheme } = useMantineColorScheme();
  const scheme = useComputedColorScheme("light");
  const next = scheme === "dark" ? "light" : "dark";
  return (
    <ActionIcon
      variant="default"
      size="lg"
      aria-label={`Switch to ${next} theme`}
      title={`Switch to ${next} theme`}
      onClick={() => setColorScheme(next)}
    >
      <span aria-hidden="true">{scheme === "dark" ? "☀" : "☾"}</span>
    </ActionIcon>
  );
}

function UserMenu() {
  const { auth } = useApp();
  const user = useUser(auth);
  const p = user?.profile;
  const who = (p?.email as string | undefined) ?? p?.name ?? p?.sub ?? "signed in";
  return (
    <Menu position="bottom-end" withinPortal>
      <Menu.Target>
        <UnstyledButton aria-label={`User menu: ${who}`} px="sm" py={6} style={{ borderRadius: 8 }}>
          <Text size="sm" fw={500}>
            {who} ▾
          </Text>
        </UnstyledButton>
      </Menu.Target>
      <Menu.Dropdown>
        <Menu.Label>{who}</Menu.Label>
        <Menu.Item color="red" onClick={() => void auth.logout()}>
          Log out
        </Menu.Item>
      </Menu.Dropdown>
    </Menu>
  );
}

export function Shell() {
  const [opened, { toggle, close }] = useDisclosure();
  const loc = useLocation();
  return (
    <AppShell header={{ height: 56 }} navbar={{ width: 230, breakpoint: "sm", collapsed: { mobile: !opened } }} padding="md">
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between">
          <Group gap="sm">
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Toggle navigation" />
            <Title order={1} size="h4">
              wiremesh
            </Title>
          </Group>
          <Group gap="xs">
            <ThemeToggle />
            <UserMenu />
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" component="nav" aria-label="Main">
        {nav.map((n) =>
          n.path ? (
            <NavLink
              key={n.label}
              component={RouterNavLink}
              to={n.path}
              label={n.label}
              active={loc.pathname.startsWith(n.path)}
              onClick={close}
            />
          ) : (
            <NavLink
              key={n.label}
              label={n.label}
              disabled
              aria-disabled="true"
              rightSection={
                <Badge size="xs" variant="light" color="gray">
                  coming
                </Badge>
              }
            />
          ),
        )}
      </AppShell.Navbar>
      <AppShell.Main>
        <Outlet />
      </AppShell.Main>
    </AppShell>
  );
}
