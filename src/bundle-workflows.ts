import { writeFileSync } from 'node:fs';
import { bundleWorkflows, PREBUILT_WORKFLOW_BUNDLE } from './worker-setup';

/** The build's last step (`npm run build`): writes the workflow bundle that workers load (worker-setup.ts). */
bundleWorkflows().then(
  ({ code }) => writeFileSync(PREBUILT_WORKFLOW_BUNDLE, code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
