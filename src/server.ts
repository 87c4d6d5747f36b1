import { once } from 'node:events';
import type { Server } from 'node:http';
import { LivePriceFeeds } from './catalogue/prices';
import { startupSelfTest } from './cli/doctor';
import { ConfigError, loadConfig } from './config';
import { nameConnections } from './db/application-name';
import { createApp } from './http/app';
import { keyCustodyIsWeak, WEAK_KEY_CUSTODY_NOTICE } from './keys/custody';
import { createLogger } from './logger';
import { routeModules } from './modules';
import { createAppDeps, createOrmWaiting } from './runtime';

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.LOG_LEVEL, 'api');
  nameConnections('custody-api');
  const orm = await createOrmWaiting(config.DATABASE_URL, config.DATABASE_POOL_MAX, () => log.warn('waiting for the database: unreachable or starting up'));
  const deps = createAppDeps(config, orm, log);
  // Every configured provider checked once and logged; in production a lasting failure of a live one stops the start before the API listens.
  await startupSelfTest(config, log, orm);
  await deps.keyCache.start();
  const { app } = createApp(deps, routeModules);
  const server: Server = app.listen(config.PORT, config.HOST);
  await once(server, 'listening').catch((error: NodeJS.ErrnoException) => {
    // Node's message names the address alone: the operator's question is which setting to change.
    if (error.code === 'EADDRINUSE') throw new ConfigError(`port ${config.PORT} (PORT) is already in use on ${config.HOST}, by another instance or program: set PORT to a free port.`);
    throw error;
  });
  log.info({ url: `http://${config.HOST}:${config.PORT}` }, 'API listening');
  if (keyCustodyIsWeak(deps.keys.provider)) log.warn(WEAK_KEY_CUSTODY_NOTICE);
  // In the background: a node on the wrong network is logged and its chain left unavailable; the API serves on.
  void deps.chains.checkAll();
  // Live prices are read in the background: until the first read, live USD values are unknown (rules fail closed).
  const livePrices = new LivePriceFeeds(config, log, deps.metrics);
  void livePrices.start();

  const shutdown = async (signal: string) => {
    log.info({ signal }, 'shutting down');
    server.close();
    await once(server, 'close');
    await deps.keyCache.stop();
    livePrices.stop();
    await deps.temporal.connection.close();
    await orm.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});
