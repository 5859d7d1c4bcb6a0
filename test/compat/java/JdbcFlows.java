import java.math.BigDecimal;
import java.sql.*;
import java.util.*;

/**
 * pgjdbc's connect, metadata (DatabaseMetaData), query, parameter, batch,
 * transaction and error flows. Prints one JSON object, so that the same
 * program run against cotwire and against PostgreSQL can be compared.
 * Usage: java -cp postgresql.jar JdbcFlows.java URL USER TARGET
 */
public class JdbcFlows {
  static final Map<String, Object> out = new TreeMap<>();

  static String json(Object v) {
    if (v == null) return "null";
    if (v instanceof Boolean || v instanceof Integer || v instanceof Long) return v.toString();
    if (v instanceof Collection<?> c) {
      StringJoiner j = new StringJoiner(",", "[", "]");
      for (Object x : c) j.add(json(x));
      return j.toString();
    }
    if (v instanceof Map<?, ?> m) {
      StringJoiner j = new StringJoiner(",", "{", "}");
      for (Map.Entry<?, ?> e : m.entrySet()) j.add(json(e.getKey().toString()) + ":" + json(e.getValue()));
      return j.toString();
    }
    String s = v.toString();
    StringBuilder b = new StringBuilder("\"");
    for (char ch : s.toCharArray()) {
      if (ch == '"' || ch == '\\') b.append('\\').append(ch);
      else if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
      else b.append(ch);
    }
    return b.append('"').toString();
  }

  static List<List<Object>> rows(ResultSet rs, String... columns) throws SQLException {
    List<List<Object>> result = new ArrayList<>();
    while (rs.next()) {
      List<Object> row = new ArrayList<>();
      for (String c : columns) row.add(rs.getObject(c) == null ? null : rs.getObject(c).toString());
      result.add(row);
    }
    rs.close();
    return result;
  }

  public static void main(String[] args) throws Exception {
    String target = args[2];
    try (Connection conn = DriverManager.getConnection(args[0], args[1], "")) {
      DatabaseMetaData md = conn.getMetaData();
      out.put("product", md.getDatabaseProductName());
      out.put("major", md.getDatabaseMajorVersion());
      out.put("isolation", conn.getTransactionIsolation());
      try (Statement st = conn.createStatement()) {
        st.execute("DROP TABLE IF EXISTS jdbc_lines");
        st.execute("DROP TABLE IF EXISTS jdbc_orders");
        st.execute("CREATE TABLE jdbc_orders (id integer PRIMARY KEY, customer text NOT NULL, total numeric(10,2), placed timestamp, paid boolean DEFAULT false)");
        st.execute("CREATE INDEX jdbc_orders_customer ON jdbc_orders (customer)");
        st.execute("CREATE TABLE jdbc_lines (order_id integer REFERENCES jdbc_orders (id), line integer, sku text, PRIMARY KEY (order_id, line))");
      }
      // Metadata, as tools (DBeaver, Metabase) browse with it.
      out.put("tables", rows(md.getTables(null, "public", "jdbc_%", new String[] {"TABLE"}), "TABLE_SCHEM", "TABLE_NAME", "TABLE_TYPE"));
      out.put("columns", rows(md.getColumns(null, "public", "jdbc_orders", "%"), "COLUMN_NAME", "TYPE_NAME", "DATA_TYPE", "NULLABLE", "ORDINAL_POSITION", "COLUMN_DEF"));
      out.put("primary_keys", rows(md.getPrimaryKeys(null, "public", "jdbc_orders"), "COLUMN_NAME", "KEY_SEQ", "PK_NAME"));
      out.put("index_info", rows(md.getIndexInfo(null, "public", "jdbc_orders", false, false), "INDEX_NAME", "NON_UNIQUE", "COLUMN_NAME", "ORDINAL_POSITION"));
      out.put("schemas", rows(md.getSchemas(null, "public"), "TABLE_SCHEM"));
      // Foreign keys, as Metabase and DBeaver find relations.
      out.put("imported_keys", rows(md.getImportedKeys(null, "public", "jdbc_lines"), "PKTABLE_NAME", "PKCOLUMN_NAME", "FKTABLE_NAME", "FKCOLUMN_NAME", "KEY_SEQ", "FK_NAME", "PK_NAME"));
      out.put("exported_keys", rows(md.getExportedKeys(null, "public", "jdbc_orders"), "PKTABLE_NAME", "PKCOLUMN_NAME", "FKTABLE_NAME", "FKCOLUMN_NAME", "KEY_SEQ", "FK_NAME"));
      List<List<Object>> types = rows(md.getTypeInfo(), "TYPE_NAME", "DATA_TYPE");
      out.put("type_info_has_int4", types.stream().anyMatch(r -> "int4".equals(r.get(0))));
      out.put("functions_run", rows(md.getFunctions(null, "pg_catalog", "lower"), "FUNCTION_NAME").size() > 0);
      // PostgreSQL's keywords that are not SQL:2003's (pgjdbc asks pg_get_keywords(); DBeaver's SQL editor uses them).
      out.put("sql_keywords", md.getSQLKeywords());
      // Parameters and batches.
      try (PreparedStatement ps = conn.prepareStatement("INSERT INTO jdbc_orders (id, customer, total, placed, paid) VALUES (?, ?, ?, ?, ?)")) {
        for (int i = 1; i <= 3; i++) {
          ps.setInt(1, i);
          ps.setString(2, "c" + i);
          ps.setBigDecimal(3, new BigDecimal(i + ".50"));
          ps.setTimestamp(4, Timestamp.valueOf("2026-0" + i + "-01 12:00:00"));
          ps.setBoolean(5, i % 2 == 0);
          ps.addBatch();
        }
        out.put("batch", Arrays.stream(ps.executeBatch()).boxed().toList());
      }
      try (PreparedStatement ps = conn.prepareStatement("SELECT id, customer, total, placed, paid FROM jdbc_orders WHERE total > ? ORDER BY id")) {
        ps.setBigDecimal(1, new BigDecimal("1"));
        for (int round = 0; round < 6; round++) ps.executeQuery().close(); // pgjdbc switches to a named server statement after 5 uses
        ResultSet rs = ps.executeQuery();
        ResultSetMetaData rmd = rs.getMetaData();
        List<Object> meta = new ArrayList<>();
        for (int i = 1; i <= rmd.getColumnCount(); i++) meta.add(rmd.getColumnName(i) + ":" + rmd.getColumnTypeName(i));
        out.put("result_meta", meta);
        out.put("select", rows(rs, "id", "customer", "total", "placed", "paid"));
      }
      // Transactions.
      conn.setAutoCommit(false);
      try (Statement st = conn.createStatement()) {
        st.executeUpdate("INSERT INTO jdbc_orders (id, customer) VALUES (10, 'gone')");
        conn.rollback();
        st.executeUpdate("INSERT INTO jdbc_orders (id, customer) VALUES (11, 'kept')");
        conn.commit();
        out.put("after_transactions", rows(st.executeQuery("SELECT id FROM jdbc_orders WHERE id >= 10"), "id"));
        conn.commit();
      }
      // Errors.
      Map<String, Object> errors = new TreeMap<>();
      for (String[] e : new String[][] {{"unique", "INSERT INTO jdbc_orders (id, customer) VALUES (1, 'dup')"}, {"undefined_table", "SELECT * FROM jdbc_nowhere"}, {"syntax", "SELEC 1"}}) {
        try (Statement st = conn.createStatement()) {
          st.execute(e[1]);
          errors.put(e[0], "no error");
        } catch (SQLException ex) {
          errors.put(e[0], ex.getSQLState());
          conn.rollback();
        }
      }
      out.put("errors", errors);
      conn.setAutoCommit(true);
      if (target.equals("cotwire")) {
        try (Statement st = conn.createStatement()) {
          ResultSet rs = st.executeQuery("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('jdbc', 'Action', 'ship') RETURNING step_index");
          rs.next();
          out.put("ledger_returning", rs.getInt(1));
        }
      }
      try (Statement st = conn.createStatement()) {
        st.execute("DROP TABLE jdbc_lines");
        st.execute("DROP TABLE jdbc_orders");
      }
    }
    System.out.println(json(out));
  }
}
