/** Dated API versions, oldest first. A key is pinned to one; `Api-Version` overrides per request. */
export const API_VERSIONS = ['2026-01-30', '2026-02-28', '2026-05-15'] as const;
export type ApiVersion = (typeof API_VERSIONS)[number];
export const LATEST_API_VERSION: ApiVersion = API_VERSIONS[API_VERSIONS.length - 1]!;

export const isApiVersion = (value: string): value is ApiVersion => (API_VERSIONS as readonly string[]).includes(value);

/** True when `version` is at or after `since` (versions are ISO dates, so they sort as strings). */
export const versionAtLeast = (version: string, since: ApiVersion): boolean => version >= since;
