"""Each user's own daily budget (`UserBudget`), which staff set in the admin."""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0012_daily_usage'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='UserBudget',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('unlimited', models.BooleanField(default=False, help_text="No daily budget for this user, whatever the site's is.")),
                ('daily_budget', models.DecimalField(blank=True, decimal_places=2, help_text="USD this user's runs may cost per UTC day; empty: AGENT_USER_DAILY_BUDGET.", max_digits=12, null=True, validators=[django.core.validators.MinValueValidator(0)])),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='agent_budget', to=settings.AUTH_USER_MODEL)),
            ],
        ),
    ]
