/** The first-run form's checks, pure so they are unit-tested. */
export interface SetupForm {
  email: string;
  name: string;
  password: string;
  confirm: string;
}
export type SetupErrors = Partial<Record<keyof SetupForm | "form", string>>;

/** Mirrors the server's rules, so the form says what is wrong before sending. */
export function validateSetup(f: SetupForm): SetupErrors {
  const e: SetupErrors = {};
  if (!/^[^\s@<>]+@[^\s@<>]+$/.test(f.email.trim())) e.email = "enter an e-mail address such as admin@example.com";
  const pw = f.password;
  if (new TextEncoder().encode(pw).length > 72) e.password = "the password must be at most 72 bytes";
  else if (pw.length < 8 || !/\p{Lu}/u.test(pw) || !/\p{Nd}/u.test(pw) || !/[^\p{L}\p{Nd}]/u.test(pw)) {
    e.password = "at least 8 characters with an upper-case letter, a digit and a symbol";
  }
  if (f.confirm !== pw) e.confirm = "the passwords differ";
  return e;
}

