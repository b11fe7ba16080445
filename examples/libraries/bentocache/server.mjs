// A reference app for stampede's `--target`: GET /items/{key} reads through bentocache's
// getOrSet in front of REDIS_URL and loads through the load ledger, so the herds the library
// lets through are counted exactly by Postgres. Settings come from the environment (README.md).
import http from 'node:http'
import { BentoCache, bentostore } from 'bentocache'
import { redisDriver } from 'bentocache/drivers/redis'
import { memoryDriver } from 'bentocache/drivers/memory'
import { Redis } from 'ioredis'
import pg from 'pg'

function env(name, fallback) {
  const v = process.env[name]
  if (v === undefined || v === '') {
    if (fallback === undefined) throw new Error(`${name} is not set`)
    return fallback
  }
  return v
}
// Durations are whole milliseconds; 0 turns an optional setting off where the library allows.
const ms = (name, fallback) => {
  const n = Number(env(name, String(fallback)))
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be milliseconds >= 0`)
  return n
}

const schema = env('DB_SCHEMA')
if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(schema)) throw new Error(`DB_SCHEMA=${schema} is not a plain identifier`)
const port = Number(env('PORT'))
const instance = env('INSTANCE', '0')
const dbPool = Number(env('DB_POOL', '16'))
const prefix = env('CACHE_PREFIX', 'stampede:')
const ttl = ms('CACHE_TTL_MS', 30000)
const grace = ms('BENTO_GRACE_MS', 0)
const graceBackoff = ms('BENTO_GRACE_BACKOFF_MS', 10000)
const softTimeout = ms('BENTO_TIMEOUT_MS', 0)
const hardTimeout = ms('BENTO_HARD_TIMEOUT_MS', 0)
const lockTimeout = ms('BENTO_LOCK_TIMEOUT_MS', 0)
const useL1 = env('BENTO_L1', '0') === '1'

// Every connection opened before the first request and kept (no idle timeout), as the
// built-in app opens its pool: a herd must not pay for connecting.
const db = new pg.Pool({ connectionString: env('DATABASE_URL'), max: dbPool, idleTimeoutMillis: 0 })
for (const c of await Promise.all(Array.from({ length: dbPool }, () => db.connect()))) c.release()
const sql = `SELECT payload FROM ${schema}.stampede_load($1)`
// One connection for the cache, as an app would hold; a failed command is an error, not a hang.
const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1, enableOfflineQueue: false })

let store = bentostore()
if (useL1) store = store.useL1Layer(memoryDriver({ maxSize: '64mb' }))
store = store.useL2Layer(redisDriver({ connection: redis }))
const bento = new BentoCache({
  default: 'items',
  // The run's prefix without its trailing ':' (bentocache adds its own separator).
  prefix: prefix.replace(/:$/, ''),
  stores: { items: store },
  ttl,
  grace: grace > 0 ? grace : false,
  graceBackoff,
  timeout: softTimeout,
  hardTimeout: hardTimeout > 0 ? hardTimeout : undefined,
  lockTimeout: lockTimeout > 0 ? lockTimeout : undefined,
})

async function load(id) {
  const r = await db.query(sql, [id])
  return r.rows.length ? r.rows[0].payload : null
}

const server = http.createServer(async (req, res) => {
  const m = /^\/items\/(\d+)$/.exec(req.url ?? '')
  if (req.method !== 'GET' || !m) {
    res.writeHead(req.url === '/health' ? 200 : 404).end()
    return
  }
  try {
    const payload = await bento.getOrSet({ key: `item:${m[1]}`, factory: () => load(m[1]) })
    if (payload === null) {
      res.writeHead(404).end()
    } else {
      res.writeHead(200, { 'content-type': 'text/plain' }).end(payload)
    }
  } catch (err) {
    res.writeHead(503, { 'content-type': 'text/plain' }).end(`${err?.code ?? ''} ${err?.message ?? err}`)
  }
})
// Node serves every connection on one event loop; loads wait for the pool's DB_POOL
// connections, so DB_POOL requests (and more) are in flight at once.
server.keepAliveTimeout = 65000
server.listen(port, '127.0.0.1', () => {
  console.log(`bentocache instance ${instance} on :${port} (ttl ${ttl} ms, grace ${grace} ms, timeout ${softTimeout} ms, l1 ${useL1})`)
})
const stop = () => server.close(() => Promise.allSettled([bento.disconnect(), db.end()]).then(() => process.exit(0)))
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
