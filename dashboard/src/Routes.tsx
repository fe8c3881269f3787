import { lazy, useState } from "react";
import { Navigate, Route, Routes, useLocation } from "react-router";
import { useApp } from "./app";
import { useUser } from "./auth/useUser";
import { Lazy } from "./layout/Lazy";
import { Shell } from "./layout/Shell";
import { LoginPage } from "./pages/LoginPage";
import { NotFoundPage } from "./pages/NotFoundPage";
import { PeersPage } from "./pages/PeersPage";
import { SetupKeysPage } from "./pages/SetupKeysPage";
import { SetupPage } from "./pages/SetupPage";

const PeerDetailPage = lazy(() => import("./pages/PeerDetailPage"));
const GroupsPage = lazy(() => import("./pages/GroupsPage"));
const PoliciesPage = lazy(() => import("./pages/PoliciesPage"));
const PostureChecksPage = lazy(() => import("./pages/PostureChecksPage"));
const UsersPage = lazy(() => import("./pages/UsersPage"));
const EventsPage = lazy(() => import("./pages/EventsPage"));
const SettingsPage = lazy(() => import("./pages/SettingsPage"));
const InvitePage = lazy(() => import("./pages/InvitePage"));
const NetworksPage = lazy(() => import("./pages/NetworksPage"));
const NetworkDetailPage = lazy(() => import("./pages/NetworkDetailPage"));
const RoutesPage = lazy(() => import("./pages/RoutesPage"));
const DnsPage = lazy(() => import("./pages/DnsPage"));
const ZoneDetailPage = lazy(() => import("./pages/ZoneDetailPage"));

export function AppRoutes({ initialSetupRequired, loginError }: { initialSetupRequired: boolean; loginError: string }) {
  const { auth } = useApp();
  const user = useUser(auth);
  const loc = useLocation();
  const [setupRequired, setSetupRequired] = useState(initialSetupRequired);

  if (setupRequired) {
    return (
      <Routes>
        <Route path="/setup" element={<SetupPage onDone={() => setSetupRequired(false)} />} />
        <Route path="*" element={<Navigate to="/setup" replace />} />
      </Routes>
    );
  }
  // An invite link: the invitee chooses a password, logged in or not.
  if (loc.pathname === "/invite") {
    return (
      <Lazy>
        <InvitePage />
      </Lazy>
    );
  }
  // An expired session with a refresh token is being renewed (Auth.token): stay.
  if (!user || (user.expired && !user.refresh_token)) {
    const returnTo = loc.pathname === "/setup" || loc.pathname === "/login" ? "/peers" : loc.pathname + loc.search;
    return <LoginPage returnTo={returnTo} error={loginError} />;
  }
  return (
    <Routes>
      <Route element={<Shell />}>
        <Route index element={<Navigate to="/peers" replace />} />
        <Route path="/peers" element={<PeersPage />} />
        <Route path="/setup-keys" element={<SetupKeysPage />} />
        <Route path="/peers/:id" element={<Lazy><PeerDetailPage /></Lazy>} />
        <Route path="/groups" element={<Lazy><GroupsPage /></Lazy>} />
        <Route path="/policies" element={<Lazy><PoliciesPage /></Lazy>} />
        <Route path="/posture-checks" element={<Lazy><PostureChecksPage /></Lazy>} />
        <Route path="/users" element={<Lazy><UsersPage /></Lazy>} />
        <Route path="/service-users" element={<Lazy><UsersPage /></Lazy>} />
        <Route path="/networks" element={<Lazy><NetworksPage /></Lazy>} />
        <Route path="/networks/:id" element={<Lazy><NetworkDetailPage /></Lazy>} />
        <Route path="/routes" element={<Lazy><RoutesPage /></Lazy>} />
        <Route path="/dns" element={<Lazy><DnsPage /></Lazy>} />
        <Route path="/dns/zones/:id" element={<Lazy><ZoneDetailPage /></Lazy>} />
        <Route path="/events" element={<Lazy><EventsPage /></Lazy>} />
        <Route path="/settings" element={<Lazy><SettingsPage /></Lazy>} />
        <Route path="/setup" element={<Navigate to="/peers" replace />} />
        <Route path="/login" element={<Navigate to="/peers" replace />} />
        <Route path="*" element={<NotFoundPage />} />
      </Route>
    </Routes>
  );
}
