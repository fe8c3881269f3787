/**
 * Login for the dashboard: OpenID Connect authorization code + PKCE with
 * oidc-client-ts against the issuer named in /dashboard-config.json.
 * Tokens live in sessionStorage (gone when the tab closes; never
 * localStorage) and are renewed silently with the refresh token before they
 * expire. Logout revokes the refresh token where the issuer can, then ends
 * the issuer's session (end_session_endpoint).
 */
import { UserManager, WebStorageStateStore, type User } from "oidc-client-ts";
import { CALLBACK_PATH, DEFAULT_SCOPE, type DashboardConfig } from "./config";

/** Where to return after login, kept in the login request's state. */
interface ReturnState {
  returnTo: string;
}

export class Auth {
  readonly manager: UserManager;
  private user: User | null = null;
  private listeners = new Set<(u: User | null) => void>();

  constructor(
    readonly config: DashboardConfig,
    origin: string = window.location.origin,
  ) {
    const extra: Record<string, string> = {};
    if (config.audience && config.audience !== config.client_id) extra.audience = config.audience;
    this.manager = new UserManager({
      authority: config.issuer,
      client_id: config.client_id,
      redirect_uri: origin + CALLBACK_PATH,
      post_logout_redirect_uri: origin + "/",
      response_type: "code",
      scope: config.scope ?? DEFAULT_SCOPE,
      extraQueryParams: extra,
      userStore: new WebStorageStateStore({ store: window.sessionStorage }),
      stateStore: new WebStorageStateStore({ store: window.sessionStorage }),
      // Renewal uses the refresh token; without one (an issuer that gives
      // none) the session ends when the access token does. It runs here
      // (renew), not in the library's own timer, so that the timer and a
      // call finding the token expired share one refresh: a refresh token
      // is single-use, and a second concurrent refresh with it is refused.
      automaticSilentRenew: false,
      revokeTokensOnSignout: false, // done by logout(), tolerating issuers without revocation
      loadUserInfo: false,
    });
    const set = (u: User | null) => {
      this.user = u;
      for (const l of this.listeners) l(u);
    };
    this.manager.events.addUserLoaded((u) => set(u));
    this.manager.events.addUserUnloaded(() => set(null));
    this.manager.events.addAccessTokenExpiring(() => {
      void this.renew().then((u) => {
        // The refresh token was refused or expired: log in again.
        if (!u) void this.manager.removeUser();
      });
    });
  }

  /** Loads a session kept in this tab, if it is still usable. */
  async restore(): Promise<User | null> {
    let u = await this.manager.getUser();
    this.user = u;
    if (u && u.expired) {
      u = await this.renew();
      if (!u) await this.manager.removeUser();
    }
    this.user = u;
    return u;
  }

  /**
   * The access token the API takes, or null. An expired one (the tab slept
   * past the renewal timer, or the clock jumped) is renewed first with the
   * refresh token, once for all the calls waiting on it, without a reload.
   */
  async token(): Promise<string | null> {
    let u = this.user;
    if (u && u.expired && u.refresh_token) u = await this.renew();
    if (!u || u.expired) return null;
    return u.access_token;
  }

  private renewing: Promise<User | null> | null = null;

  private renew(): Promise<User | null> {
    if (!this.user?.refresh_token) return Promise.resolve(null);
    this.renewing ??= this.manager
      .signinSilent()
      .catch(() => null)
      .finally(() => {
        this.renewing = null;
      });
    return this.renewing;
  }

  current(): User | null {
    return this.user;
  }

  subscribe(f: (u: User | null) => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }

  /** Sends the browser to the issuer's login page. */
  login(returnTo: string): Promise<void> {
    const state: ReturnState = { returnTo };
    return this.manager.signinRedirect({ state });
  }

  /** Completes a login on CALLBACK_PATH; returns where to go next. */
  async completeLogin(): Promise<string> {
    const u = await this.manager.signinRedirectCallback();
    this.user = u;
    const st = u.state as ReturnState | undefined;
    const to = st?.returnTo;
    return to && to.startsWith("/") && !to.startsWith("//") ? to : "/";
  }

  /** Ends the session here and at the issuer. */
  async logout(): Promise<void> {
    const u = this.user;
    try {
      await this.manager.revokeTokens(["refresh_token"]);
    } catch {
      // The issuer has no revocation endpoint; end-session still ends the login.
    }
    try {
      await this.manager.signoutRedirect({ id_token_hint: u?.id_token });
    } catch {
      // No end_session_endpoint: forget the session here at least.
      await this.manager.removeUser();
      window.location.assign("/");
    }
  }
}
