package tributary;

import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.api.java.UDF2;

/**
 * Every group of a regular expression's first match in a value, in one match: over (value,
 * pattern), the groups' texts (a group that took no part is "", as regexp_extract gives), or null
 * when the pattern does not match (rlike's false). A text source's `parse:` needs whether each line
 * matches and each group's text; as Spark's rlike and regexp_extract that is one match per group
 * plus one, and this is one match a line (about 4 times faster over an access log's 7 groups).
 *
 * <p>The same java.util.regex and the same find() as Spark's regexp_extract and rlike, so the same
 * texts. The matcher is kept per thread and reset for each value while the pattern stays the same.
 */
public final class RegexGroups implements UDF2<String, String, String[]> {
  /** The pattern this thread matched last, and its matcher. */
  private static final class Last {
    String pattern;
    Matcher matcher;
  }

  private static final ThreadLocal<Last> LAST = ThreadLocal.withInitial(Last::new);

  @Override
  public String[] call(String value, String pattern) {
    if (value == null) {
      return null;
    }
    Last last = LAST.get();
    if (!pattern.equals(last.pattern)) {
      last.matcher = Pattern.compile(pattern).matcher("");
      last.pattern = pattern;
    }
    Matcher matcher = last.matcher.reset(value);
    if (!matcher.find()) {
      return null;
    }
    String[] groups = new String[matcher.groupCount()];
    for (int i = 0; i < groups.length; i++) {
      String group = matcher.group(i + 1);
      groups[i] = group == null ? "" : group;
    }
    return groups;
  }
}
