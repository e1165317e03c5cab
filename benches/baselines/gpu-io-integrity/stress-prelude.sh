# Sourced by the issue 41 device scripts after device-prelude.sh: one slice of the
# stress matrix, its JSON record and its headline in summary.log.
# stress_slice TAG FILTER LIMIT_S
stress_slice() {
  export BAM_STRESS_JSON=$W/stress-$1.json
  timeout "$3" "$D/bam-cache-tests" --stress 1G 1 "$2" > "$W/stress-$1.log" 2>&1
  echo "== stress '$2' rc=$?" >> "$S"
  echo "$(grep -c '^PASS stress' "$W/stress-$1.log") PASS, $(grep -c '^FAIL stress' "$W/stress-$1.log") FAIL" >> "$S"
  grep -E "^FAIL stress|^stress:" "$W/stress-$1.log" | cut -c1-400 >> "$S"
  keep
}
