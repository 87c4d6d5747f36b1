/** RFC 3339 UTC with milliseconds, the contract's timestamp form. */
export const iso = (date: Date): string => date.toISOString();

export const isoOrNull = (date: Date | null | undefined): string | null => (date ? date.toISOString() : null);

/** Unix seconds, where the specification marks them. */
export const unixSeconds = (date: Date): number => Math.floor(date.getTime() / 1000);
