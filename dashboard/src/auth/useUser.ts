import type { User } from "oidc-client-ts";
import { useEffect, useState } from "react";
import type { Auth } from "./auth";

/** The logged-in user, re-rendering on login, renewal and logout. */
export function useUser(auth: Auth): User | null {
  const [u, setU] = useState<User | null>(() => auth.current());
  useEffect(() => auth.subscribe(setU), [auth]);
  return u;
}
