// A reference app for stampede's `--target`: GET /items/{key} reads through a Caffeine
// LoadingCache (expireAfterWrite, optionally refreshAfterWrite) and loads through the load
// ledger, so the loads the library lets through are counted exactly by Postgres. Caffeine is
// in-process: it needs no Redis, and each instance has its own cache. Served by the JDK's own
// HTTP server on a thread pool; settings come from the environment (README.md).

import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.LoadingCache;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Executors;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class Main {
    static String env(String name, String fallback) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            if (fallback == null) throw new IllegalStateException(name + " is not set");
            return fallback;
        }
        return v;
    }

    static final Pattern ITEM = Pattern.compile("^/items/(\\d+)$");

    public static void main(String[] args) throws Exception {
        String schema = env("DB_SCHEMA", null);
        if (!schema.matches("[A-Za-z_][A-Za-z0-9_]*")) throw new IllegalStateException("DB_SCHEMA=" + schema + " is not a plain identifier");
        int port = Integer.parseInt(env("PORT", null));
        int dbPool = Integer.parseInt(env("DB_POOL", "16"));
        int threads = Integer.parseInt(env("HTTP_THREADS", String.valueOf(Math.max(64, dbPool))));
        long ttl = Long.parseLong(env("CACHE_TTL_MS", "30000"));
        long refresh = Long.parseLong(env("CAFFEINE_REFRESH_MS", "0"));
        String sql = "SELECT payload FROM " + schema + ".stampede_load(?)";

        // A fixed pool of DB_POOL connections: a load waits for one, as with any app's pool.
        BlockingQueue<Connection> pool = new ArrayBlockingQueue<>(dbPool);
        URI db = URI.create(env("DATABASE_URL", null));
        Properties props = new Properties();
        String userInfo = db.getRawUserInfo();
        if (userInfo != null) {
            String[] up = userInfo.split(":", 2);
            props.setProperty("user", URLDecoder.decode(up[0], StandardCharsets.UTF_8));
            if (up.length > 1) props.setProperty("password", URLDecoder.decode(up[1], StandardCharsets.UTF_8));
        }
        String jdbc = "jdbc:postgresql://" + db.getHost() + ":" + (db.getPort() > 0 ? db.getPort() : 5432) + db.getPath()
                + (db.getRawQuery() != null ? "?" + db.getRawQuery() : "");
        for (int i = 0; i < dbPool; i++) pool.add(DriverManager.getConnection(jdbc, props));

        Caffeine<Object, Object> builder = Caffeine.newBuilder().expireAfterWrite(Duration.ofMillis(ttl));
        if (refresh > 0) builder = builder.refreshAfterWrite(Duration.ofMillis(refresh));
        // Optional: Caffeine cannot cache a null, and a missing item is an answer too.
        LoadingCache<Long, Optional<String>> cache = builder.build(id -> {
            Connection c = pool.take();
            try (PreparedStatement st = c.prepareStatement(sql)) {
                st.setLong(1, id);
                try (ResultSet rs = st.executeQuery()) {
                    return rs.next() ? Optional.of(rs.getString(1)) : Optional.empty();
                }
            } finally {
                pool.put(c);
            }
        });

        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 4096);
        server.createContext("/", ex -> handle(ex, cache));
        // A thread per request in flight up to HTTP_THREADS: loads queue for the DB_POOL connections.
        server.setExecutor(Executors.newFixedThreadPool(threads));
        server.start();
        System.out.println("caffeine instance " + env("INSTANCE", "0") + " on :" + port + " (ttl " + ttl
                + " ms, refresh " + refresh + " ms, " + threads + " threads, db pool " + dbPool + ")");
    }

    static void handle(HttpExchange ex, LoadingCache<Long, Optional<String>> cache) throws IOException {
        String path = ex.getRequestURI().getPath();
        Matcher m = ITEM.matcher(path);
        int status;
        byte[] body = new byte[0];
        if (!m.matches()) {
            status = path.equals("/health") ? 200 : 404;
        } else {
            try {
                Optional<String> payload = cache.get(Long.parseLong(m.group(1)));
                status = payload.isPresent() ? 200 : 404;
                body = payload.orElse("").getBytes(StandardCharsets.UTF_8);
            } catch (RuntimeException e) { // a failed load (SQLException inside): the error is the answer
                status = 503;
                body = String.valueOf(e.getCause() != null ? e.getCause() : e).getBytes(StandardCharsets.UTF_8);
            }
        }
        ex.getResponseHeaders().set("Content-Type", "text/plain");
        ex.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(body);
        }
    }
}
