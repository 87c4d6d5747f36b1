import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { historyFromJSON, historyToJSON } from '@temporalio/common/lib/proto-utils';

const HISTORY_DIR = path.resolve(__dirname, '../../../test/fixtures/histories');

/**
 * With RECORD_HISTORIES=1, saves a finished workflow's history as the replay fixture of that
 * workflow (`RECORD_HISTORIES=1 npm test -- --grep ...`). Committed fixtures are what the replay
 * tests run, so a change that would break running workflows fails CI.
 */
export async function recordHistoryIfAsked(handle: WorkflowHandle, name: string): Promise<void> {
  if (process.env.RECORD_HISTORIES !== '1') return;
  const history = await handle.fetchHistory();
  await writeFile(path.join(HISTORY_DIR, `${name}.json`), JSON.stringify(JSON.parse(historyToJSON(history)), null, 2));
}

export async function loadHistory(name: string) {
  return historyFromJSON(JSON.parse(await readFile(path.join(HISTORY_DIR, `${name}.json`), 'utf8')));
}

/** How many times the workflow has scheduled the activity `name` so far, read from its history. */
export async function activitiesScheduled(handle: WorkflowHandle, name: string): Promise<number> {
  return (await handle.fetchHistory()).events!.filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === name).length;
}
