package tributarybench;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.streaming.GroupStateTimeout;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * A sketch for benchmarks/bench_swa.py --spark-state, not part of Tributary: SWA (Li et al., §5.1)
 * as one of Spark's own stateful operators (flatMapGroupsWithState, event-time timeouts), so a
 * stream runs it inside the query, with no per-micro-batch plan of ours. It measures what that
 * design could reach against native session windows on the benchmark's stream.
 *
 * Per key, the state holds the tuples not yet emitted (as Tributary's per-micro-batch operator
 * does), and each micro-batch folds them with the new ones in event-time order: a window is
 * emitted once its start + t, or its n-th tuple, is behind the watermark. The benchmark's
 * aggregates are written out in Java (count, sum and max of response_ms, sum of bytes, the set of
 * requested services), where Tributary takes any Spark SQL aggregate. It has no quarantine,
 * late-row audit, run figures or rescaling (Spark pins a stateful operator's partitions at a
 * stream's first run).
 *
 * Input rows: k (the key as one string), micros (event time), response_ms, bytes, requested_service.
 *
 * Two outputs: `windows` (the aggregates written in Java, one row per window) and `tuples` (each
 * tuple of an emitted window with its window's columns, for Spark SQL aggregates over them per
 * micro-batch: the form a real step would need, since Tributary takes any Spark SQL aggregate).
 */
public final class SwaGroupState {
  private SwaGroupState() {}

  /** A key's tuples not yet emitted, in event-time order. */
  public static final class Held implements Serializable {
    public long[] micros = new long[0];
    public int[] ms = new int[0];
    public long[] bytes = new long[0];
    public String[] services = new String[0];
  }

  /** The columns naming a window, first in both outputs. */
  private static StructType window() {
    return new StructType()
        .add("k", DataTypes.StringType)
        .add("window_start", DataTypes.LongType)
        .add("window_end", DataTypes.LongType);
  }

  static final StructType WINDOWS = window()
      .add("tuple_count", DataTypes.IntegerType)
      .add("total_ms", DataTypes.LongType)
      .add("slowest_ms", DataTypes.IntegerType)
      .add("bytes", DataTypes.LongType)
      .add("services", DataTypes.createArrayType(DataTypes.StringType))
      .add("closed_by", DataTypes.StringType);

  static final StructType TUPLES = window()
      .add("closed_by", DataTypes.StringType)
      .add("response_ms", DataTypes.IntegerType)
      .add("bytes", DataTypes.LongType)
      .add("requested_service", DataTypes.StringType);

  public static Dataset<Row> windows(Dataset<Row> tuples, int size, long timeoutMicros) {
    return folded(tuples, new Fold(size, timeoutMicros, false), WINDOWS);
  }

  /** Each tuple of each emitted window, with the window's start, end and how it closed. */
  public static Dataset<Row> tuples(Dataset<Row> tuples, int size, long timeoutMicros) {
    return folded(tuples, new Fold(size, timeoutMicros, true), TUPLES);
  }

  private static Dataset<Row> folded(Dataset<Row> tuples, Fold fold, StructType out) {
    return tuples
        .groupByKey((MapFunction<Row, String>) row -> row.getString(0), Encoders.STRING())
        .flatMapGroupsWithState(
            fold, OutputMode.Append(), Encoders.kryo(Held.class), Encoders.row(out), GroupStateTimeout.EventTimeTimeout());
  }

  static final class Fold implements FlatMapGroupsWithStateFunction<String, Row, Held, Row> {
    private final int size;
    private final long timeout;
    private final boolean perTuple;

    Fold(int size, long timeout, boolean perTuple) {
      this.size = size;
      this.timeout = timeout;
      this.perTuple = perTuple;
    }

    @Override
    public Iterator<Row> call(String key, Iterator<Row> rows, GroupState<Held> state) {
      Held held = state.exists() ? state.get() : new Held();
      List<Object[]> tuples = new ArrayList<>();
      for (int i = 0; i < held.micros.length; i++) {
        tuples.add(new Object[] {held.micros[i], held.ms[i], held.bytes[i], held.services[i]});
      }
      while (rows.hasNext()) {
        Row r = rows.next();
        tuples.add(new Object[] {r.getLong(1), r.isNullAt(2) ? 0 : r.getInt(2), r.isNullAt(3) ? 0L : r.getLong(3), r.getString(4)});
      }
      tuples.sort((a, b) -> Long.compare((Long) a[0], (Long) b[0]));  // stable: arrival order breaks ties
      long mark = state.getCurrentWatermarkMs() * 1000L;
      List<Row> emitted = new ArrayList<>();
      int first = 0;
      while (first < tuples.size()) {
        long start = (Long) tuples.get(first)[0];
        int end = first;
        long totalMs = 0;
        long bytes = 0;
        int slowest = Integer.MIN_VALUE;
        LinkedHashSet<String> services = new LinkedHashSet<>();
        while (end < tuples.size() && end - first < size && (Long) tuples.get(end)[0] - start <= timeout) {
          Object[] t = tuples.get(end++);
          if (perTuple) {
            continue;  // the window's tuples are emitted as they are, once it is known to be final
          }
          totalMs += (Integer) t[1];
          slowest = Math.max(slowest, (Integer) t[1]);
          bytes += (Long) t[2];
          if (t[3] != null) {
            services.add((String) t[3]);
          }
        }
        int count = end - first;
        long last = (Long) tuples.get(end - 1)[0];
        boolean byCount = count >= size;
        if (!(start + timeout < mark || (byCount && last < mark))) {
          break;  // this window and every later one may still change
        }
        long windowEnd = byCount ? last : start + timeout;
        String closedBy = byCount ? "count" : "timeout";
        if (perTuple) {
          for (Object[] t : tuples.subList(first, end)) {
            emitted.add(RowFactory.create(key, start, windowEnd, closedBy, t[1], t[2], t[3]));
          }
        } else {
          emitted.add(RowFactory.create(key, start, windowEnd, count, totalMs, slowest, bytes,
              services.toArray(new String[0]), closedBy));
        }
        first = end;
      }
      if (first < tuples.size()) {
        state.update(kept(tuples.subList(first, tuples.size())));
        state.setTimeoutTimestamp(((Long) tuples.get(first)[0] + timeout) / 1000 + 1);
      } else if (state.exists()) {
        state.remove();
      }
      return emitted.iterator();
    }

    private static Held kept(List<Object[]> tuples) {
      Held held = new Held();
      int n = tuples.size();
      held.micros = new long[n];
      held.ms = new int[n];
      held.bytes = new long[n];
      held.services = new String[n];
      for (int i = 0; i < n; i++) {
        Object[] t = tuples.get(i);
        held.micros[i] = (Long) t[0];
        held.ms[i] = (Integer) t[1];
        held.bytes[i] = (Long) t[2];
        held.services[i] = (String) t[3];
      }
      return held;
    }
  }
}
