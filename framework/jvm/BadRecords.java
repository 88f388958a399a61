package tributary;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.expressions.Aggregator;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import scala.Tuple4;

/**
 * A source's bad records, kept as the run reads them, up to a bound: over (file, line, record,
 * reason), the rows with a reason as a JSON array of [file, line, record, reason], or null once
 * they pass 10,000 rows or 16 MB (the run then reads them again). An aggregate of the Observation
 * that counts a source's bad records, so the quarantine needs no second pass over the source for
 * the few a file usually holds: that pass parsed every line again.
 *
 * <p>Each task keeps its own and Spark merges them on the way to the driver; which rows a full
 * buffer would keep does not matter, as a full one is dropped.
 */
public final class BadRecords extends Aggregator<Tuple4<String, Long, String, String>, BadRecords.Kept, String> {
  static final int MAX_ROWS = 10_000;
  static final long MAX_BYTES = 16L << 20;
  private static final ObjectMapper JSON = new ObjectMapper();

  /** The records kept so far, the bytes they take, and whether there were too many. */
  public static final class Kept implements Serializable {
    ArrayList<Object[]> rows = new ArrayList<>();
    long bytes;
    boolean full;
  }

  /** The aggregate as a function over (file STRING, line BIGINT, record STRING, reason STRING). */
  public static UserDefinedFunction function() {
    return functions.udaf(
        new BadRecords(), Encoders.tuple(Encoders.STRING(), Encoders.LONG(), Encoders.STRING(), Encoders.STRING()));
  }

  @Override
  public Kept zero() {
    return new Kept();
  }

  @Override
  public Kept reduce(Kept kept, Tuple4<String, Long, String, String> record) {
    if (record == null || record._4() == null || kept.full) {
      return kept; // a good row, or too many already
    }
    kept.bytes += 2L * (length(record._1()) + length(record._3()) + length(record._4())) + 8;
    if (kept.rows.size() >= MAX_ROWS || kept.bytes > MAX_BYTES) {
      return full(kept);
    }
    kept.rows.add(new Object[] {record._1(), record._2(), record._3(), record._4()});
    return kept;
  }

  @Override
  public Kept merge(Kept a, Kept b) {
    if (a.full || b.full || a.rows.size() + b.rows.size() > MAX_ROWS || a.bytes + b.bytes > MAX_BYTES) {
      return full(a);
    }
    a.rows.addAll(b.rows);
    a.bytes += b.bytes;
    return a;
  }

  @Override
  public String finish(Kept kept) {
    if (kept.full) {
      return null;
    }
    try {
      return JSON.writeValueAsString(kept.rows);
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public Encoder<Kept> bufferEncoder() {
    return Encoders.javaSerialization(Kept.class);
  }

  @Override
  public Encoder<String> outputEncoder() {
    return Encoders.STRING();
  }

  private static Kept full(Kept kept) {
    kept.rows = new ArrayList<>();
    kept.bytes = 0;
    kept.full = true;
    return kept;
  }

  private static int length(String text) {
    return text == null ? 0 : text.length();
  }
}
