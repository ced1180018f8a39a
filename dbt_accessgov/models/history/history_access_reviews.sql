{{ full_table_history('access_reviews') }}
