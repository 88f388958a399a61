package tributary;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.expressions.MutableAggregationBuffer;
import org.apache.spark.sql.expressions.UserDefinedAggregateFunction;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * {@link SwaFoldSized} in the form a SQL function can name: Spark builds `CREATE TEMPORARY FUNCTION
 * name AS 'class'` only for a class with a no-argument constructor that implements a UDF interface
 * or extends UserDefinedAggregateFunction (an {@code Aggregator} gets NO_HANDLER_FOR_UDAF), and that
 * statement is the one way a Spark Connect client can register a JVM aggregate on the server: it
 * has no py4j gateway to hand the server an object. Same rule and output struct (_1: unit, _2:
 * start, _3: position) over (event time micros, size, timeout micros); the buffer is three longs.
 */
@SuppressWarnings("deprecation") // UserDefinedAggregateFunction: the only aggregate CREATE FUNCTION builds
public final class SwaFoldFunction extends UserDefinedAggregateFunction {
  private static final StructType INPUT =
      new StructType().add("micros", DataTypes.LongType).add("size", DataTypes.LongType).add("timeout", DataTypes.LongType);
  private static final StructType BUFFER =
      new StructType().add("unit", DataTypes.LongType).add("start", DataTypes.LongType).add("count", DataTypes.LongType);
  private static final StructType OUTPUT =
      new StructType().add("_1", DataTypes.LongType).add("_2", DataTypes.LongType).add("_3", DataTypes.LongType);

  @Override
  public StructType inputSchema() {
    return INPUT;
  }

  @Override
  public StructType bufferSchema() {
    return BUFFER;
  }

  @Override
  public DataType dataType() {
    return OUTPUT;
  }

  @Override
  public boolean deterministic() {
    return true;
  }

  @Override
  public void initialize(MutableAggregationBuffer buffer) {
    buffer.update(0, -1L);
    buffer.update(1, 0L);
    buffer.update(2, 0L);
  }

  @Override
  public void update(MutableAggregationBuffer buffer, Row input) {
    if (input.isNullAt(0)) {
      return; // tuples without an event time are quarantined before the fold
    }
    SwaFold.OpenWindow window = new SwaFold.OpenWindow();
    window.unit = buffer.getLong(0);
    window.start = buffer.getLong(1);
    window.count = buffer.getLong(2);
    SwaFold.step(window, input.getLong(0), input.getLong(1), input.getLong(2));
    buffer.update(0, window.unit);
    buffer.update(1, window.start);
    buffer.update(2, window.count);
  }

  @Override
  public void merge(MutableAggregationBuffer buffer, Row other) {
    throw new UnsupportedOperationException("SwaFoldFunction runs over a window frame in order, not in a grouped aggregate");
  }

  @Override
  public Object evaluate(Row buffer) {
    return org.apache.spark.sql.RowFactory.create(buffer.getLong(0), buffer.getLong(1), buffer.getLong(2));
  }
}
