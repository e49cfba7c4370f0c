// The example payment service in Java: POST /payments with an Idempotency-Key
// header books a payment once, however often the request is retried.  The claim,
// the INSERT and the stored response commit or roll back together.
//
// The JDK's HTTP server, pgjdbc and Gson (JSON), as Debian packages them.

import com.google.gson.Gson;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonPrimitive;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.StringReader;
import java.math.BigDecimal;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Properties;
import java.util.concurrent.Executors;
import java.util.regex.Pattern;

public class Payments {
	// The request, with the two test knobs: delay_ms (a slow gateway) and fail
	record Request(String account, BigDecimal amount, String currency, long delay_ms, boolean fail) {}

	// The 201 answer.  The id and the amount as strings: a JavaScript client
	// would round an id above 2^53, and 100.50 stays 100.50 (BigDecimal keeps
	// the digits as given).
	record Created(String id, String account, String amount, String currency) {}

	// What goes back to the client: retryAfter is null unless status is 409;
	// replayed: the answer of an earlier request with the key
	record Answer(int status, String contentType, String body, Integer retryAfter, boolean replayed) {}

	// A problem body (RFC 9457), as idem's own; field names the request's
	// member at fault (Gson leaves out a null)
	record Problem(String type, String title, int status, String detail, String field) {}

	// A request that is not a payment: the detail, and the field at fault
	static class Invalid extends Exception {
		final String field;

		Invalid(String detail, String field) {
			super(detail);
			this.field = field;
		}
	}

	// The checks of a payment request, the same in every example service
	static final Pattern AMOUNT = Pattern.compile("(0|[1-9][0-9]*)(\\.[0-9]{1,2})?");
	static final Pattern CURRENCY = Pattern.compile("[A-Z]{3}");
	static final Pattern DELAY_MS = Pattern.compile("0|[1-9][0-9]{0,4}");

	static final Gson GSON = new Gson();
	static final int THREADS = 10;
	static String url;
	static final Properties props = new Properties();

	// The connection pool: each of the THREADS worker threads keeps one
	// connection of its own, and opens a new one when it was closed.
	static final ThreadLocal<Connection> connection = new ThreadLocal<>();

	public static void main(String[] args) throws IOException {
		// DATABASE_URL is a libpq URI, postgresql://USER[:PASSWORD]@HOST:PORT/DB;
		// without a password there, PGPASSWORD's, as libpq does
		URI db = URI.create(System.getenv("DATABASE_URL"));
		url = "jdbc:postgresql://" + db.getHost() + (db.getPort() == -1 ? "" : ":" + db.getPort()) + db.getPath();
		String[] user = db.getUserInfo().split(":", 2);
		props.setProperty("user", user[0]);
		String password = user.length > 1 ? user[1] : System.getenv("PGPASSWORD");
		if (password != null)
			props.setProperty("password", password);
		if ("1".equals(System.getenv("PGBOUNCER"))) {
			// pgbouncer in transaction pooling: the next transaction may run on
			// another server connection, so no named prepared statements
			// (pgjdbc names a statement from its 5th execution on).  pgjdbc also
			// sends extra_float_digits when it connects, which pgbouncer refuses
			// unless its ini says ignore_startup_parameters = extra_float_digits.
			props.setProperty("prepareThreshold", "0");
		}
		int port = Integer.parseInt(System.getenv("PORT"));
		// a backlog with room for a burst of requests
		HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 100);
		server.createContext("/payments", Payments::handle);
		server.setExecutor(Executors.newFixedThreadPool(THREADS));
		server.start();
		System.out.println("listening on " + port);
	}

	static void handle(HttpExchange exchange) throws IOException {
		if (!exchange.getRequestMethod().equals("POST")) {
			send(exchange, problem(404, "Not Found", "POST /payments books a payment.", null));
			return;
		}
		byte[] data = exchange.getRequestBody().readAllBytes();
		send(exchange, answer(exchange.getRequestHeaders().getFirst("Idempotency-Key"), data));
	}

	static Answer answer(String key, byte[] data) {
		Request request;
		try {
			// before the claim: a request refused here writes nothing and
			// leaves its key unused, for the corrected request
			request = validate(data);
		} catch (Invalid e) {
			return problem(400, "Invalid request", e.getMessage(), e.field);
		}
		try {
			return pay(key, new String(data, StandardCharsets.UTF_8), request);
		} catch (Exception e) {
			System.err.println("payment failed: "
					+ (e instanceof SQLException s ? "SQLSTATE " + s.getSQLState() + ": " : "") + e.getMessage());
			return problem(500, "Internal Server Error",
					"The payment was not booked: retry it with the same Idempotency-Key.", null);
		}
	}

	// One payment request, in one transaction
	static Answer pay(String key, String body, Request request) throws Exception {
		Connection db = connection();
		try {
			try (ResultSet claim = row(db, """
					SELECT status, http_status, body, content_type, retry_after
					  FROM idem_http_claim(?, idem_fingerprint(?::jsonb))""", key, body)) {
				String status = claim.getString("status");
				if (!status.equals("claimed")) {
					// a replay (completed, failed), a duplicate still in flight,
					// a mismatch or a bad key: idem has the answer
					Answer answer = new Answer(claim.getInt("http_status"), claim.getString("content_type"),
							claim.getString("body"), claim.getObject("retry_after", Integer.class),
							status.equals("completed") || status.equals("failed"));
					db.commit();
					return answer;
				}
			}
			long id;
			try (ResultSet payment = row(db,
					"INSERT INTO payments (idem_key, account, amount, currency) VALUES (?, ?, ?, ?) RETURNING id",
					key, request.account(), request.amount(), request.currency())) {
				id = payment.getLong("id");
			}
			Thread.sleep(request.delay_ms());
			if (request.fail())
				throw new IllegalStateException("the gateway failed (test knob \"fail\")");

			String created = GSON.toJson(new Created(
					Long.toString(id), request.account(), request.amount().toString(), request.currency()));
			row(db, "SELECT idem_http_respond(?, 201, ?)", key, created).close();
			db.commit();
			return new Answer(201, "application/json", created, null, false);
		} catch (Exception e) {
			try {
				db.rollback();
			} catch (SQLException rollbackFailed) {
				// it may still be in a transaction (behind pgbouncer, its server
				// connection "idle in transaction (aborted)", lost to the pool):
				// never use it again.  (So does a connection that broke.)
				discard(db);
			}
			throw e;
		}
	}

	// Runs one statement and returns its result on its first row; closing
	// the result closes the statement
	static ResultSet row(Connection db, String sql, Object... params) throws SQLException {
		PreparedStatement statement = db.prepareStatement(sql);
		for (int i = 0; i < params.length; i++)
			statement.setObject(i + 1, params[i]);
		statement.closeOnCompletion();
		ResultSet result = statement.executeQuery();
		result.next();
		return result;
	}

	static void send(HttpExchange exchange, Answer answer) throws IOException {
		exchange.getResponseHeaders().set("Content-Type", answer.contentType());
		if (answer.retryAfter() != null)
			exchange.getResponseHeaders().set("Retry-After", answer.retryAfter().toString());
		if (answer.replayed())
			exchange.getResponseHeaders().set("Idempotent-Replayed", "true");
		byte[] bytes = answer.body().getBytes(StandardCharsets.UTF_8);
		exchange.sendResponseHeaders(answer.status(), bytes.length);
		exchange.getResponseBody().write(bytes);
		exchange.close();
	}

	// This worker thread's connection, opened when it has none or lost it
	static Connection connection() throws SQLException {
		Connection db = connection.get();
		if (db == null || db.isClosed()) {
			db = DriverManager.getConnection(url, props);
			db.setAutoCommit(false);
			connection.set(db);
		}
		return db;
	}

	// Closes this worker thread's connection db: the next request opens another
	static void discard(Connection db) {
		connection.remove();
		try {
			db.close();
		} catch (SQLException e) {
			System.err.println("closing a connection: " + e.getMessage());
		}
	}

	// The payment request in the body, checked field by field: strict JSON
	// in UTF-8, one object and nothing after it (Gson's fromJson is lenient,
	// its JsonReader is not)
	static Request validate(byte[] data) throws Invalid {
		JsonObject req;
		try {
			JsonReader json = new JsonReader(new StringReader(
					StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(data)).toString()));
			JsonElement body = GSON.getAdapter(JsonElement.class).read(json);
			if (!body.isJsonObject() || json.peek() != JsonToken.END_DOCUMENT)
				throw new Invalid("the body must be a JSON object", null);
			req = body.getAsJsonObject();
		} catch (IOException | JsonParseException e) {
			throw new Invalid("the body must be a JSON object", null);
		}
		String account = string(req, "account");
		if (account == null || account.isEmpty())
			throw new Invalid("account must be a non-empty string", "account");
		String amount = number(req, "amount");
		if (amount == null || !AMOUNT.matcher(amount).matches() || !amount.matches(".*[1-9].*"))
			throw new Invalid("amount must be a positive number with at most 2 decimals", "amount");
		String currency = string(req, "currency");
		if (currency == null || !CURRENCY.matcher(currency).matches())
			throw new Invalid("currency must be 3 capital letters (ISO 4217)", "currency");
		// the test knobs, optional
		String delay = req.has("delay_ms") ? number(req, "delay_ms") : "0";
		if (delay == null || !DELAY_MS.matcher(delay).matches() || Integer.parseInt(delay) > 10000)
			throw new Invalid("delay_ms must be an integer from 0 to 10000", "delay_ms");
		JsonElement fail = req.has("fail") ? req.get("fail") : new JsonPrimitive(false);
		if (!fail.isJsonPrimitive() || !fail.getAsJsonPrimitive().isBoolean())
			throw new Invalid("fail must be true or false", "fail");
		return new Request(account, new BigDecimal(amount), currency, Long.parseLong(delay), fail.getAsBoolean());
	}

	// The member name of req if it is a JSON string, else null
	static String string(JsonObject req, String name) {
		JsonElement value = req.get(name);
		return value != null && value.isJsonPrimitive() && value.getAsJsonPrimitive().isString()
				? value.getAsString() : null;
	}

	// The member name of req as written if it is a JSON number, else null
	static String number(JsonObject req, String name) {
		JsonElement value = req.get(name);
		return value != null && value.isJsonPrimitive() && value.getAsJsonPrimitive().isNumber()
				? value.getAsString() : null;
	}

	static Answer problem(int status, String title, String detail, String field) {
		return new Answer(status, "application/problem+json",
				GSON.toJson(new Problem("about:blank", title, status, detail, field)), null, false);
	}
}
