package tributary;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URISyntaxException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.compress.CompressionCodecFactory;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.lib.input.FileSplit;
import org.apache.hadoop.mapreduce.lib.input.LineRecordReader;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.deploy.SparkHadoopUtil;
import org.apache.spark.sql.api.java.UDF3;

/**
 * The 1-based line number of a line read with Spark's line reader (lineSep "\n"), which splits a
 * large file between tasks by bytes: over (the file's path, its split's first byte, the task's
 * spark_partition_id()). No pass counts each split's lines first (a micro-batch cannot run one,
 * framework/io/origin.py), so each task counts the lines before its split itself, once per split,
 * by reading the file up to the split's first byte; after that, a line's number is one more than
 * the line before it in the task.
 *
 * <p>Why this is exact:
 * <ul>
 *   <li>The lines of a split are the ones Hadoop's LineRecordReader gives it: a split that starts at
 *       byte b > 0 throws away the text up to the first newline at or after b (the split before
 *       reads that line to its end). So the lines before its first are the newlines in [0, b) plus
 *       the one thrown away; for a compressed file that splits (bzip2, by its own blocks), the lines
 *       the reader gives the part [0, b), counted by the reader itself.
 *   <li>A task reads its splits one after another, each in file order, and calls this once per row
 *       as it reads: Spark evaluates a nondeterministic expression for every row of a projection and
 *       never moves a filter below one. The partition id argument makes the call nondeterministic
 *       (Structured Streaming refuses monotonically_increasing_id()).
 * </ul>
 */
public final class LineNumber implements UDF3<String, Long, Integer, Integer> {
  /** The split this task thread numbers now: its task attempt, file, first byte and next line's number. */
  private static final class Split {
    long task = -1;
    String file;
    long start = -1;
    long next;
  }

  private static final ThreadLocal<Split> CURRENT = ThreadLocal.withInitial(Split::new);

  @Override
  public Integer call(String file, Long start, Integer partition) {
    Split split = CURRENT.get();
    TaskContext task = TaskContext.get();
    long attempt = task == null ? -1 : task.taskAttemptId();
    if (split.task != attempt || split.start != start || !file.equals(split.file)) {
      split.task = attempt;
      split.file = file;
      split.start = start;
      split.next = start == 0 ? 1 : linesBefore(file, start) + 1;
    }
    return Math.toIntExact(split.next++);
  }

  /** The number of lines before the first line of the file's split that starts at byte `start` > 0. */
  static long linesBefore(String file, long start) {
    try {
      Path path = new Path(new URI(file));
      Configuration conf = SparkHadoopUtil.get().newConfiguration(SparkEnv.get().conf());
      if (new CompressionCodecFactory(conf).getCodec(path) != null) {
        return linesRead(path, start, conf);
      }
      return newlinesBefore(path, start, conf) + 1;
    } catch (IOException e) {
      throw new UncheckedIOException("could not count the lines before byte " + start + " of " + file, e);
    } catch (URISyntaxException e) {
      throw new IllegalArgumentException(file, e);
    }
  }

  /** The newlines in the file's first `end` bytes. */
  private static long newlinesBefore(Path path, long end, Configuration conf) throws IOException {
    byte[] buffer = new byte[1 << 20];
    long count = 0;
    long left = end;
    try (InputStream in = path.getFileSystem(conf).open(path)) {
      while (left > 0) {
        int read = in.read(buffer, 0, (int) Math.min(buffer.length, left));
        if (read < 0) {
          break;
        }
        for (int i = 0; i < read; i++) {
          if (buffer[i] == '\n') {
            count++;
          }
        }
        left -= read;
      }
    }
    return count;
  }

  /** The lines Hadoop's line reader gives the split [0, end) of the file. */
  private static long linesRead(Path path, long end, Configuration conf) throws IOException {
    long count = 0;
    try (LineRecordReader reader = new LineRecordReader(new byte[] {'\n'})) {
      reader.initialize(new FileSplit(path, 0, end, new String[0]), new TaskAttemptContextImpl(conf, new TaskAttemptID()));
      while (reader.nextKeyValue()) {
        count++;
      }
    }
    return count;
  }
}
