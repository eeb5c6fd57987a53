// The package ships no typings: it exports an array of role local parts (admin, info, ...) with the groups attached.
declare module 'role-based-email-addresses' {
  const roles: string[] & { MARKETING: string[]; NOTIFICATION: string[]; MEETING: string[]; OTHER: string[] };
  export = roles;
}
