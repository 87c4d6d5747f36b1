import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * The ports a test's node may take: below the kernel's ephemeral range. A port the kernel handed out (listen on 0)
 * lies in that range, where every outgoing connection of the suite's processes takes its local port too: between
 * this answer and the node's bind, one did (a whole run at load 25: lnd "bind: address already in use"). Below 32768
 * too, as scripts/lib.sh's free_port (the scripts' servers), so that the two never draw from different ranges.
 */
const LOWEST = 10_000;
const ephemeralLow = (): number => {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > LOWEST + 1000 ? Math.min(low, 32_768) : 32_768;
  } catch {
    return 32_768;
  }
};

/** Whether `port` binds on 127.0.0.1 now. */
async function bindable(port: number): Promise<boolean> {
  const server = net.createServer();
  server.listen(port, '127.0.0.1');
  const listening = await new Promise<boolean>((resolve) => {
    server.once('listening', () => resolve(true));
    server.once('error', () => resolve(false));
  });
  if (!listening) return false;
  server.close();
  await once(server, 'close');
  return true;
}

/** A TCP port free on 127.0.0.1 right now, outside the ephemeral range, for a node a test starts. */
export async function freeLoopbackPort(): Promise<number> {
  const high = ephemeralLow();
  for (let attempt = 0; attempt < 200; attempt += 1) {
    const port = LOWEST + Math.floor(Math.random() * (high - LOWEST));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port on 127.0.0.1 between ${LOWEST} and ${high - 1} after 200 tries`);
}
