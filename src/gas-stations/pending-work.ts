import { pendingRows, pendingWork, type PendingWorkSource } from '../temporal/reconciler';
import { Sponsorship } from './entities';
import { sponsorshipFlow } from './flows/sponsorship';

/** Sponsorships still funding or broadcasting: each must have its `sponsorship-<id>` workflow running (a send waits on it). */
export const sponsorshipPendingWork: PendingWorkSource = {
  name: 'sponsorship',
  pending: async (em, query) => {
    const { rows, next } = await pendingRows(em, Sponsorship, { status: { $in: ['funding', 'broadcasting'] }, createdAt: { $lt: query.olderThan } }, query);
    return { work: rows.map((sponsorship) => pendingWork(sponsorshipFlow, { sponsorshipId: sponsorship.id }, sponsorship.organization.id)), next };
  },
};
