package tributary;

import java.io.Serializable;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.expressions.Aggregator;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import scala.Tuple3;

/**
 * The SWA rule as a running aggregate: used over a window ordered by (event time, tiebreak) with
 * the frame ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW, it gives each tuple its window's
 * ordinal within the key, the window's start (micros) and the tuple's 1-based position in the
 * window, in the same pass as Spark's sort.
 *
 * <p>Per key, the first tuple opens a window with start s; a tuple with ts - s <= timeout joins
 * while the window holds fewer than `size` tuples; the size-th tuple closes it; a tuple with
 * ts - s > timeout opens the next one. The output struct is (_1: unit, _2: start, _3: position).
 */
public final class SwaFold extends Aggregator<Long, SwaFold.OpenWindow, Tuple3<Long, Long, Long>> {
  /** The key's newest window: its ordinal, first event time and tuples so far. */
  public static final class OpenWindow implements Serializable {
    long unit = -1;
    long start;
    long count;
  }

  private final long size;
  private final long timeoutMicros;

  public SwaFold(long size, long timeoutMicros) {
    this.size = size;
    this.timeoutMicros = timeoutMicros;
  }

  /** The aggregate as a function over one BIGINT column (event time in micros). */
  public static UserDefinedFunction function(long size, long timeoutMicros) {
    return functions.udaf(new SwaFold(size, timeoutMicros), Encoders.LONG());
  }

  @Override
  public OpenWindow zero() {
    return new OpenWindow();
  }

  @Override
  public OpenWindow reduce(OpenWindow window, Long micros) {
    if (micros == null) {
      return window; // tuples without an event time are quarantined before the fold
    }
    return step(window, micros, size, timeoutMicros);
  }

  /** One tuple of the rule: it joins the key's newest window or opens the next one. */
  static OpenWindow step(OpenWindow window, long ts, long size, long timeoutMicros) {
    if (window.count == 0 || window.count >= size || ts - window.start > timeoutMicros) {
      window.unit++;
      window.start = ts;
      window.count = 1;
    } else {
      window.count++;
    }
    return window;
  }

  /** Never called over a running frame; a fold in order has no meaningful merge of two parts. */
  @Override
  public OpenWindow merge(OpenWindow a, OpenWindow b) {
    throw new UnsupportedOperationException("SwaFold runs over a window frame in order, not in a grouped aggregate");
  }

  @Override
  public Tuple3<Long, Long, Long> finish(OpenWindow window) {
    return new Tuple3<>(window.unit, window.start, window.count);
  }

  @Override
  public Encoder<OpenWindow> bufferEncoder() {
    return Encoders.javaSerialization(OpenWindow.class);
  }

  @Override
  public Encoder<Tuple3<Long, Long, Long>> outputEncoder() {
    return Encoders.tuple(Encoders.LONG(), Encoders.LONG(), Encoders.LONG());
  }
}
