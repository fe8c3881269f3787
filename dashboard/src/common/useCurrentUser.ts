/** The signed-in user with its permissions, refreshed now and then (a role change shows without a reload). */
import type { User } from "../api/client";
import { usePoll } from "../api/poll";
import { useApp } from "../app";

export function useCurrentUser(): { me: User | undefined; error: unknown } {
  const { api } = useApp();
  const r = usePoll((signal) => api.get("/api/users/current", { signal }), 15_000, [], ["users", "account"]);
  return { me: r.data, error: r.error };
}
