/**
 * useAccessState loads what access is computed from (peers, groups,
 * policies, posture checks and which users are blocked) and keeps it
 * fresh, for the pages that answer "who reaches whom".
 */
import { useMemo } from "react";
import { ApiError, type Group, type Peer, type Schemas } from "../api/client";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { buildIndex, type AccessIndex } from "./evaluate";

export interface AccessState {
  peers: Peer[];
  groups: Group[];
  policies: Schemas["Policy"][];
  postureChecks: Schemas["PostureCheck"][];
  /** undefined when the users could not be read (then no peer counts as blocked). */
  blockedUsers: Set<string> | undefined;
  usersError: unknown;
}

export function useAccessState() {
  const { api } = useApp();
  const state = usePoll(async (signal): Promise<AccessState> => {
    const users = api.get("/api/users", { signal }).then(
      (us) => ({ blocked: new Set(us.filter((u) => u.is_blocked).map((u) => u.id)), err: null as unknown }),
      (err: unknown) => {
        if (err instanceof DOMException && err.name === "AbortError") throw err;
        return { blocked: undefined, err };
      },
    );
    const [peers, groups, policies, postureChecks, u] = await Promise.all([
      api.get("/api/peers", { signal }),
      api.get("/api/groups", { signal }),
      api.get("/api/policies", { signal }),
      api.get("/api/posture-checks", { signal }),
      users,
    ]);
    return { peers, groups, policies, postureChecks, blockedUsers: u.blocked, usersError: u.err };
  }, LIVE_INTERVAL_MS);
  const index: AccessIndex | undefined = useMemo(() => {
    const d = state.data;
    if (!d) return undefined;
    return buildIndex({ peers: d.peers, groups: d.groups, policies: d.policies, postureChecks: d.postureChecks, blockedUsers: d.blockedUsers });
  }, [state.data]);
  return { ...state, index };
}

/** A note for a users list that could not be read, or "". */
export function usersNote(err: unknown): string {
  if (!err) return "";
  const why = err instanceof ApiError ? err.message : String(err);
  return `The users could not be read (${why}): peers of blocked users are counted as taking part.`;
}
