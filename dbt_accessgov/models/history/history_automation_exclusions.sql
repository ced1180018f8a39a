{{ full_table_history('automation_exclusions') }}
