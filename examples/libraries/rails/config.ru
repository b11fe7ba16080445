# A reference app for stampede's `--target`: GET /items/{key} reads through ActiveSupport's
# RedisCacheStore#fetch (expires_in, race_condition_ttl) and loads through the load ledger, so
# the herds the library lets through are counted exactly by Postgres. Served by puma's threads
# (run.sh); settings come from the environment (README.md).
require "active_support"
require "active_support/cache"
require "active_support/cache/redis_cache_store"
require "connection_pool"
require "pg"

def env(name, default = nil)
  v = ENV[name].to_s
  return v unless v.empty?
  raise "#{name} is not set" if default.nil?
  default
end

# Durations in whole milliseconds, as the float seconds ActiveSupport takes; nil when 0.
def seconds(name, default_ms)
  ms = Integer(env(name, default_ms.to_s))
  raise "#{name} must be milliseconds >= 0" if ms.negative?
  ms.zero? ? nil : ms / 1000.0
end

schema = env("DB_SCHEMA")
raise "DB_SCHEMA=#{schema} is not a plain identifier" unless schema.match?(/\A[A-Za-z_][A-Za-z0-9_]*\z/)
db_pool = Integer(env("DB_POOL", "16"))
sql = "SELECT payload FROM #{schema}.stampede_load($1)"

CACHE = ActiveSupport::Cache::RedisCacheStore.new(
  url: env("REDIS_URL"),
  # RedisCacheStore joins namespace and key with ':'; the run's prefix already ends with one.
  namespace: env("CACHE_PREFIX", "stampede:").delete_suffix(":"),
  expires_in: seconds("CACHE_TTL_MS", 30_000),
  race_condition_ttl: seconds("RAILS_RACE_TTL_MS", 0),
  # One Redis connection per puma thread, as Rails sizes its pools (RAILS_MAX_THREADS).
  pool_size: Integer(env("PUMA_THREADS", db_pool.to_s)),
  pool_timeout: 5,
)
# Every connection opened now, as the built-in app opens its pool: a herd must not pay for
# connecting (ConnectionPool asks its block lazily, and is handed the open ones).
opened = Queue.new
db_pool.times { opened << PG.connect(env("DATABASE_URL")) }
DB = ConnectionPool.new(size: db_pool, timeout: 30) { opened.pop }

run(lambda do |rack_env|
  path = rack_env["PATH_INFO"]
  m = %r{\A/items/(\d+)\z}.match(path)
  next [path == "/health" ? 200 : 404, {}, []] unless m

  id = m[1]
  begin
    payload = CACHE.fetch("item:#{id}") do
      DB.with { |c| c.exec_params(sql, [id]).values.dig(0, 0) }
    end
  rescue StandardError => e
    next [503, { "content-type" => "text/plain" }, ["#{e.class}: #{e.message}"]]
  end
  next [404, {}, []] if payload.nil?

  [200, { "content-type" => "text/plain" }, [payload]]
end)
