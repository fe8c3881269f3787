import { useState } from "react";
import { Navigate, Route, Routes, useLocation } from "react-router";
import { useApp } from "./app";
import { useUser } from "./auth/useUser";
import { Shell } from "./layout/Shell";
import { LoginPage } from "./pages/LoginPage";
import { NotFoundPage } from "./pages/NotFoundPage";
import { PeersPage } from "./pages/PeersPage";
import { SetupKeysPage } from "./pages/SetupKeysPage";
import { SetupPage } from "./pages/SetupPage";

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
  if (!user || user.expired) {
    const returnTo = loc.pathname === "/setup" || loc.pathname === "/login" ? "/peers" : loc.pathname + loc.search;
    return <LoginPage returnTo={returnTo} error={loginError} />;
  }
  return (
    <Routes>
      <Route element={<Shell />}>
        <Route index element={<Navigate to="/peers" replace />} />
        <Route path="/peers" element={<PeersPage />} />
        <Route path="/setup-keys" element={<SetupKeysPage />} />
        <Route path="/setup" element={<Navigate to="/peers" replace />} />
        <Route path="/login" element={<Navigate to="/peers" replace />} />
        <Route path="*" element={<NotFoundPage />} />
      </Route>
    </Routes>
  );
}
