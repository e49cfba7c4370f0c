// pgjdbc behind pgbouncer in transaction pooling: payments through idem
// (BEGIN; claim; INSERT the charge; complete; COMMIT) with the driver's
// defaults, or with PGBOUNCER=1 its setting for the pooler, prepareThreshold=0
// (no named server-side statements).  With HTTP=1 the payment claims with
// idem_http_claim and finishes with idem_http_respond (idem 1.4) instead of
// idem_claim and idem_complete.  With the source launcher:
//
//   java -cp postgresql.jar Pay.java postgresql://USER@HOST:PORT/DB clash PREFIX
//     client a pays 7 keys, then client b pays up to 7 on the same server
//     connection ("shared"), and one more ("after"); then, while a third
//     client holds a server connection in a transaction, a pays once more
//     on one it has not used ("moved").  Prints for each step ok, or its
//     first failure as SQLSTATE@PAYMENT.
//   java -cp postgresql.jar Pay.java postgresql://USER@HOST:PORT/DB storm PREFIX CLIENTS PAYMENTS KEYS
//     CLIENTS connections at once each make PAYMENTS payments, client i's
//     j-th on key PREFIX-((i*PAYMENTS+j) % KEYS), a failed one retried up to
//     10 times.  Prints "KEY STATUS" per payment, after an "error SQLSTATE
//     MESSAGE" for each error of its failed attempts.
import java.math.BigDecimal;
import java.net.URI;
import java.sql.*;
import java.util.*;
import java.util.concurrent.*;

public class Pay {
	static String url;
	static final boolean http = "1".equals(System.getenv("HTTP"));

	static Connection connect() throws SQLException {
		Connection c = DriverManager.getConnection(url);
		c.setAutoCommit(false);
		return c;
	}

	// One payment in one transaction; returns the claim's status
	static String pay(Connection c, String key) throws SQLException {
		try {
			String status;
			try (PreparedStatement claim = c.prepareStatement(
					http ? "SELECT status FROM idem_http_claim(?, idem_fingerprint(?::jsonb))"
							: "SELECT status FROM idem_claim(?, idem_fingerprint(?::jsonb))")) {
				claim.setString(1, key);
				claim.setString(2, "{\"amount\": \"100.00\"}");
				ResultSet rs = claim.executeQuery();
				rs.next();
				status = rs.getString(1);
			}
			if (status.equals("claimed")) {
				long id;
				try (PreparedStatement charge = c.prepareStatement(
						"INSERT INTO payments (idem_key, amount) VALUES (?, ?) RETURNING id")) {
					charge.setString(1, key);
					charge.setBigDecimal(2, new BigDecimal("100.00"));
					ResultSet rs = charge.executeQuery();
					rs.next();
					id = rs.getLong(1);
				}
				try (PreparedStatement done = c.prepareStatement(
						http ? "SELECT idem_http_respond(?, 201, ?)" : "SELECT idem_complete(?, ?::jsonb)")) {
					done.setString(1, key);
					done.setString(2, "{\"payment\": " + id + "}");
					done.executeQuery();
				}
			}
			c.commit();
			return status;
		} catch (SQLException e) {
			// a ROLLBACK that fails too is reported after the first error
			try {
				c.rollback();
			} catch (SQLException r) {
				e.setNextException(r);
			}
			throw e;
		}
	}

	// A line "error SQLSTATE MESSAGE" for each error of a failure, as the
	// driver chains them (the statement's, then the transaction's end)
	static String error(SQLException e) {
		StringBuilder s = new StringBuilder();
		for (; e != null; e = e.getNextException())
			s.append("error ").append(e.getSQLState()).append(' ').append(e.getMessage().split("\n")[0]).append('\n');
		return s.toString();
	}

	// The SQLSTATE of the first of n payments on fresh keys that fails, with
	// its number ("42P05@6"), or ok
	static String payMany(Connection c, String prefix, int n) {
		for (int j = 1; j <= n; j++) {
			try {
				pay(c, prefix + "-" + j);
			} catch (SQLException e) {
				return e.getSQLState() + "@" + j;
			}
		}
		return "ok";
	}

	static void clash(String prefix) throws SQLException {
		Connection a = connect(), b = connect(), holder = connect();
		System.out.println("shared " + payMany(a, prefix + "-a", 7) + " " + payMany(b, prefix + "-b", 7));
		System.out.println("after " + payMany(b, prefix + "-after", 1));
		holder.createStatement().execute("SELECT 1");
		System.out.println("moved " + payMany(a, prefix + "-moved", 1));
		holder.close();
	}

	static void storm(String prefix, int clients, int payments, int keys) throws Exception {
		ExecutorService pool = Executors.newFixedThreadPool(clients);
		CyclicBarrier start = new CyclicBarrier(clients);
		List<Future<String>> outs = new ArrayList<>();
		for (int i = 0; i < clients; i++) {
			int me = i;
			outs.add(pool.submit(() -> {
				StringBuilder out = new StringBuilder();
				try (Connection c = connect()) {
					start.await();
					for (int j = 0; j < payments; j++) {
						String key = prefix + "-" + (me * payments + j) % keys;
						String status = "error";
						for (int t = 0; t < 10 && status.equals("error"); t++) {
							try {
								status = pay(c, key);
							} catch (SQLException e) {
								out.append(error(e));
							}
						}
						out.append(key).append(' ').append(status).append('\n');
					}
				}
				return out.toString();
			}));
		}
		for (Future<String> out : outs)
			System.out.print(out.get());
		pool.shutdown();
	}

	public static void main(String[] args) throws Exception {
		URI u = new URI(args[0]);
		url = "jdbc:postgresql://" + u.getHost() + ":" + u.getPort() + u.getPath() + "?user=" + u.getUserInfo()
				+ ("1".equals(System.getenv("PGBOUNCER")) ? "&prepareThreshold=0" : "");
		try {
			if (args[1].equals("clash"))
				clash(args[2]);
			else
				storm(args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), Integer.parseInt(args[5]));
		} catch (ExecutionException e) {
			System.out.print(error((SQLException) e.getCause()));
			System.exit(1);
		} catch (SQLException e) {
			System.out.print(error(e));
			System.exit(1);
		}
	}
}
