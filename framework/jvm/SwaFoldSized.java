package tributary;

import java.io.Serializable;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.expressions.Aggregator;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import scala.Tuple3;

/**
 * {@link SwaFold} with the window size and timeout read from each tuple (columns), for windows
 * sized per key (`size: auto`): every tuple of a key carries the same size and timeout. The rule
 * and the output struct (_1: unit, _2: start, _3: position) are SwaFold's.
 */
public final class SwaFoldSized
    extends Aggregator<Tuple3<Long, Long, Long>, SwaFold.OpenWindow, Tuple3<Long, Long, Long>> {

  /** The aggregate over three BIGINT columns: event time (micros), size, timeout (micros). */
  public static UserDefinedFunction function() {
    return functions.udaf(
        new SwaFoldSized(), Encoders.tuple(Encoders.LONG(), Encoders.LONG(), Encoders.LONG()));
  }

  @Override
  public SwaFold.OpenWindow zero() {
    return new SwaFold.OpenWindow();
  }

  @Override
  public SwaFold.OpenWindow reduce(SwaFold.OpenWindow window, Tuple3<Long, Long, Long> tuple) {
    if (tuple == null || tuple._1() == null) {
      return window; // tuples without an event time are quarantined before the fold
    }
    return SwaFold.step(window, tuple._1(), tuple._2(), tuple._3());
  }

  @Override
  public SwaFold.OpenWindow merge(SwaFold.OpenWindow a, SwaFold.OpenWindow b) {
    throw new UnsupportedOperationException("SwaFoldSized runs over a window frame in order, not in a grouped aggregate");
  }

  @Override
  public Tuple3<Long, Long, Long> finish(SwaFold.OpenWindow window) {
    return new Tuple3<>(window.unit, window.start, window.count);
  }

  @Override
  public Encoder<SwaFold.OpenWindow> bufferEncoder() {
    return Encoders.javaSerialization(SwaFold.OpenWindow.class);
  }

  @Override
  public Encoder<Tuple3<Long, Long, Long>> outputEncoder() {
    return Encoders.tuple(Encoders.LONG(), Encoders.LONG(), Encoders.LONG());
  }
}
