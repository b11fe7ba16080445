<?php
// A reference app for stampede's `--target`: GET /items/{key} reads through Symfony Cache's
// RedisAdapter with `$cache->get($key, $callback, $beta)` (probabilistic early expiration and
// the LockRegistry's flock) and loads through the load ledger, so the herds the library lets
// through are counted exactly by Postgres. Served by php-fpm workers behind nginx (run.sh);
// settings come from the environment (README.md).

declare(strict_types=1);

require_once '/usr/share/php/Symfony/Component/Cache/autoload.php';

use Symfony\Component\Cache\Adapter\RedisAdapter;
use Symfony\Component\Cache\LockRegistry;
use Symfony\Contracts\Cache\ItemInterface;

function env(string $name, ?string $default = null): string
{
    $v = getenv($name);
    if ($v === false || $v === '') {
        if ($default === null) {
            throw new RuntimeException("$name is not set");
        }
        return $default;
    }
    return $v;
}

function reply(int $status, string $body): void
{
    http_response_code($status);
    header('Content-Type: text/plain');
    echo $body;
}

$path = parse_url($_SERVER['REQUEST_URI'] ?? '/', PHP_URL_PATH);
if (!preg_match('#^/items/(\d+)$#', (string) $path, $m)) {
    reply($path === '/health' ? 200 : 404, '');
    return;
}
$id = (int) $m[1];

try {
    $schema = env('DB_SCHEMA');
    if (!preg_match('/^[A-Za-z_][A-Za-z0-9_]*$/', $schema)) {
        throw new RuntimeException("DB_SCHEMA=$schema is not a plain identifier");
    }
    // Symfony's Redis lifetimes are whole seconds: the TTL is rounded up.
    $ttl = max(1, (int) ceil((int) env('CACHE_TTL_MS', '30000') / 1000));
    $beta = (float) env('SYMFONY_BETA', '1.0');

    // Files private to this instance, as a second host would have its own: the lock is an
    // flock, so it holds between this instance's workers and no further (run.sh makes them).
    $lockDir = env('SYMFONY_LOCK_DIR');
    if (env('SYMFONY_LOCK', '1') === '1') {
        LockRegistry::setFiles(glob("$lockDir/lock.*") ?: []);
    } else {
        LockRegistry::setFiles([]);
    }

    // One Redis and one Postgres connection per php-fpm worker, kept across requests
    // (persistent), as a PHP host keeps them: DB_POOL workers = DB_POOL DB connections.
    try {
        $redis = RedisAdapter::createConnection(env('REDIS_URL'), ['persistent' => 1, 'persistent_id' => 'stampede']);
        $redis->setOption(\Redis::OPT_PREFIX, env('CACHE_PREFIX', 'stampede:'));
    } catch (\Exception $e) {
        // Redis is down. An unconnected client makes every call fail inside the adapter, which
        // logs it and reads a miss (fail open), as with FrameworkBundle's lazy connections;
        // nothing is written through it, so it needs no prefix.
        $redis = new \Redis();
    }
    $cache = new RedisAdapter($redis, '', $ttl);

    $payload = $cache->get("item.$id", function (ItemInterface $item) use ($id, $schema, $ttl) {
        $item->expiresAfter($ttl);
        $pdo = new PDO(pg_dsn(env('DATABASE_URL')), null, null, [
            PDO::ATTR_PERSISTENT => true,
            PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
        ]);
        $st = $pdo->prepare("SELECT payload FROM $schema.stampede_load(?)");
        $st->execute([$id]);
        $row = $st->fetch(PDO::FETCH_NUM);
        return $row === false ? null : $row[0];
    }, $beta);
} catch (Throwable $e) {
    reply(503, get_class($e) . ': ' . $e->getMessage());
    return;
}
$payload === null ? reply(404, '') : reply(200, $payload);

/** postgres://user:pass@host:port/db?sslmode=x as a PDO DSN (PDO does not take the URL form). */
function pg_dsn(string $url): string
{
    $u = parse_url($url);
    if ($u === false || !isset($u['host'])) {
        throw new RuntimeException('DATABASE_URL is not a postgres:// URL');
    }
    $dsn = sprintf('pgsql:host=%s;port=%d;dbname=%s', $u['host'], $u['port'] ?? 5432, ltrim($u['path'] ?? '/postgres', '/'));
    if (isset($u['user'])) {
        $dsn .= ';user=' . urldecode($u['user']);
    }
    if (isset($u['pass'])) {
        $dsn .= ';password=' . urldecode($u['pass']);
    }
    parse_str($u['query'] ?? '', $q);
    if (isset($q['sslmode'])) {
        $dsn .= ';sslmode=' . $q['sslmode'];
    }
    return $dsn;
}
