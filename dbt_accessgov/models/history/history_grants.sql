{{ full_table_history('grants') }}
