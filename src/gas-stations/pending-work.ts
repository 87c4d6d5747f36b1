import { pendingWork, type PendingWorkSource } from '../temporal/reconciler';
import { Sponsorship } from './entities';
import { sponsorshipFlow } from './flows/sponsorship';

/** Sponsorships still funding or broadcasting: each must have its `sponsorship-<id>` workflow running (a send waits on it). */
export const sponsorshipPendingWork: PendingWorkSource = {
  name: 'sponsorship',
  pending: async (em, query) => {
    const sponsorships = await em.find(
      Sponsorship,
      {
        status: { $in: ['funding', 'broadcasting'] },
        createdAt: { $lt: query.olderThan },
        ...(query.organizationId ? { organization: query.organizationId } : {}),
      },
      { limit: query.limit, orderBy: { createdAt: 'asc' } },
    );
    return sponsorships.map((sponsorship) => pendingWork(sponsorshipFlow, { sponsorshipId: sponsorship.id }, sponsorship.organization.id));
  },
};
